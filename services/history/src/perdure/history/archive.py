"""The archive writer: closed runs written in the export format (run_archive.py) before
retention deletes them, each to its own file, so `perdure workflow import` can restore any.

PERDURE_ARCHIVE names the target: a directory (`/path` or `file:///path`). A run's file is
`<dir>/<namespace>/<run id>.perdure-run.gz`, written to a temporary file, synced and renamed
into place: a reader never sees half a file, and writing again after a crash replaces the
file, never duplicates it. (`s3://` targets are not built: the setting is refused at start.)
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from psycopg import AsyncConnection

from perdure.history import run_archive

SUFFIX = ".perdure-run.gz"

# What the retention loop is handed: archive these closed runs (their keys) before deleting.
Archiver = Callable[[AsyncConnection, Sequence[str]], Awaitable[None]]


@dataclass(frozen=True)
class ArchiveTarget:
    """Where archived runs go: a directory."""

    directory: Path

    @classmethod
    def parse(cls, setting: str) -> ArchiveTarget:
        """A target from its URL or path; SystemExit for one that cannot be used."""
        url = urlparse(setting)
        if url.scheme in ("", "file"):
            path = Path(url.path if url.scheme else setting)
            if not path.is_absolute():
                raise SystemExit(f"PERDURE_ARCHIVE must be an absolute path, not {setting!r}")
            return cls(path)
        raise SystemExit(
            f"PERDURE_ARCHIVE {setting!r}: only a directory (/path or file:///path) is "
            f"supported; {url.scheme}:// targets are not"
        )

    @classmethod
    def from_env(cls) -> ArchiveTarget | None:
        """PERDURE_ARCHIVE's target; None when unset (closed runs are deleted unarchived)."""
        setting = os.environ.get("PERDURE_ARCHIVE", "").strip()
        return cls.parse(setting) if setting else None

    def path_of(self, namespace: str, run_id: str) -> Path:
        """Where a run's archive goes."""
        return self.directory / namespace / f"{run_id}{SUFFIX}"


async def archive_runs(
    conn: AsyncConnection, run_keys: Sequence[str], target: ArchiveTarget
) -> None:
    """Write each run (keys of history.workflows: a workflow id, or '@~<run id>' for an earlier
    run of a chain) to `target`, each file in place before this returns. Raises when one
    cannot be written: the caller keeps the runs it was about to delete."""
    for key in run_keys:
        buffer = io.BytesIO()
        written = await run_archive.write_run(conn, key, buffer)
        final = target.path_of(written.namespace, written.run_id)
        await asyncio.to_thread(write_atomically, final, buffer.getvalue())


def write_atomically(path: Path, data: bytes) -> None:
    """`data` as the file at `path`, whole or not at all: a temporary file beside it, synced,
    renamed into place, the rename synced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(path)
        _sync_directory(path.parent)
    finally:
        temporary.unlink(missing_ok=True)


def _sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def archiver(target: ArchiveTarget) -> Archiver:
    """archive_runs bound to `target`, as the retention loop calls it."""

    async def archive(conn: AsyncConnection, run_keys: Sequence[str]) -> None:
        await archive_runs(conn, run_keys, target)

    return archive
