"""What the CLI's listings share: plain tables and times."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp


def when(stamp: Timestamp) -> str:
    """A time as the tables show it (UTC, to the second)."""
    moment = datetime.fromtimestamp(stamp.seconds, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell; "(none)" for no rows."""
    if not rows:
        print("(none)")
        return
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
