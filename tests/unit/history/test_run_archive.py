"""The archive format carries every column of the tables it archives (docs/schema/history.txt,
the schema as the migrations leave it): a column added by a migration must be archived too, or
an import would lose it. And the archive target's setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from perdure.history import run_archive
from perdure.history.archive import ArchiveTarget

SCHEMA = Path(__file__).parents[3] / "docs" / "schema" / "history.txt"
# A run's place in its database's list (a sequence of the target's own), never archived.
# A run_seq and a journal partition (part) are the target database's own.
NOT_ARCHIVED = {
    "workflows": {"run_seq", "part"},
    "events": {"part"},
    "signal_consumptions": {"part"},
}


def _columns(table: str) -> set[str]:
    lines = SCHEMA.read_text().splitlines()
    start = lines.index(f"TABLE history.{table}") + 1
    columns = set()
    for line in lines[start:]:
        name = line.strip().split(" ", 1)[0]
        if not line.startswith("  ") or name in ("CONSTRAINT", "CREATE"):
            break
        columns.add(name)
    return columns


@pytest.mark.parametrize(
    ("table", "archived"),
    [
        ("workflows", run_archive.RUN_COLUMNS),
        ("events", run_archive.EVENT_COLUMNS),
        *run_archive.SIDE_TABLES.items(),
    ],
)
def test_every_column_is_archived(table: str, archived: tuple[str, ...]) -> None:
    assert set(archived) == _columns(table) - NOT_ARCHIVED.get(table, set())
    assert len(set(archived)) == len(archived)


def test_an_archive_target_is_an_absolute_directory_or_a_bucket() -> None:
    assert ArchiveTarget.parse("/srv/archive").directory == Path("/srv/archive")
    assert ArchiveTarget.parse("file:///srv/archive").directory == Path("/srv/archive")
    assert ArchiveTarget.parse("/a").name_of("acme", "r1") == "acme/r1.perdure-run.gz"
    bucket = ArchiveTarget.parse("s3://runs/perdure/archive/")
    assert (bucket.directory, bucket.bucket, bucket.prefix) == (None, "runs", "perdure/archive")
    for refused in ("archive", "s3:///no-bucket", "https://example.com/x"):
        with pytest.raises(SystemExit):
            ArchiveTarget.parse(refused)
