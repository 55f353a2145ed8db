"""The archive writer: closed runs written in the export format (run_archive.py) before
retention deletes them, each to its own file, so `perdure workflow import` can restore any.

PERDURE_ARCHIVE names the target:

- a directory (`/path` or `file:///path`): a run's file is
  `<dir>/<namespace>/<run id>.perdure-run.gz`, written to a temporary file, synced and renamed
  into place: a reader never sees half a file, and writing again after a crash replaces the
  file, never duplicates it;
- an S3-compatible bucket (`s3://bucket/prefix`): the object `<prefix>/<namespace>/<run
  id>.perdure-run.gz`, put whole (an object is never seen half written; a second put of the
  same key replaces it). Needs boto3 (`pip install 'perdure-history[s3]'`); the endpoint,
  region and credentials are boto3's own settings (AWS_ENDPOINT_URL_S3, AWS_DEFAULT_REGION,
  AWS_ACCESS_KEY_ID, ...).
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from psycopg import AsyncConnection

from perdure.history import run_archive

SUFFIX = ".perdure-run.gz"

# What the retention loop is handed: archive these closed runs (their keys) before deleting.
Archiver = Callable[[AsyncConnection, Sequence[str]], Awaitable[None]]


@dataclass(frozen=True)
class ArchiveTarget:
    """Where archived runs go: a directory, or an S3 bucket and key prefix."""

    directory: Path | None = None
    bucket: str = ""
    prefix: str = ""

    @classmethod
    def parse(cls, setting: str) -> ArchiveTarget:
        """A target from its URL or path; SystemExit for one that cannot be used."""
        url = urlparse(setting)
        if url.scheme in ("", "file"):
            path = Path(url.path if url.scheme else setting)
            if not path.is_absolute():
                raise SystemExit(f"PERDURE_ARCHIVE must be an absolute path, not {setting!r}")
            return cls(directory=path)
        if url.scheme == "s3" and url.netloc:
            _s3_client()  # boto3 missing stops the start, not an archive
            return cls(bucket=url.netloc, prefix=url.path.strip("/"))
        raise SystemExit(
            f"PERDURE_ARCHIVE {setting!r}: use a directory (/path or file:///path) or an S3 "
            "bucket (s3://bucket/prefix)"
        )

    @classmethod
    def from_env(cls) -> ArchiveTarget | None:
        """PERDURE_ARCHIVE's target; None when unset (closed runs are deleted unarchived)."""
        setting = os.environ.get("PERDURE_ARCHIVE", "").strip()
        return cls.parse(setting) if setting else None

    def name_of(self, namespace: str, run_id: str) -> str:
        """A run's archive's name under the target."""
        return f"{namespace}/{run_id}{SUFFIX}"

    def put(self, name: str, data: bytes) -> None:
        """Store `data` as `name`, whole or not at all (blocking: run it in a thread)."""
        if self.directory is not None:
            write_atomically(self.directory / name, data)
            return
        key = f"{self.prefix}/{name}" if self.prefix else name
        _s3_client().put_object(Bucket=self.bucket, Key=key, Body=data)


def _s3_client() -> Any:
    try:
        import boto3  # only an S3 target needs it
    except ImportError as exc:
        raise SystemExit(
            "PERDURE_ARCHIVE names an S3 bucket: install boto3 (pip install 'perdure-history[s3]')"
        ) from exc
    return boto3.client("s3")


async def archive_runs(
    conn: AsyncConnection, run_keys: Sequence[str], target: ArchiveTarget
) -> None:
    """Write each run (keys of history.workflows: a workflow id, or '@~<run id>' for an earlier
    run of a chain) to `target`, each in place before this returns. Raises when one cannot be
    written: the caller keeps the runs it was about to delete."""
    for key in run_keys:
        buffer = io.BytesIO()
        written = await run_archive.write_run(conn, key, buffer)
        name = target.name_of(written.namespace, written.run_id)
        await asyncio.to_thread(target.put, name, buffer.getvalue())


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
