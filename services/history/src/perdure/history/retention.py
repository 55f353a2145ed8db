"""Frame retention: the frames of a run are kept PERDURE_STREAM_RETENTION seconds after it
closes (default 7 days), then a background sweep deletes them, a bounded batch of runs at a
time (the journal itself is kept)."""

from __future__ import annotations

import os

from perdure.common.background import BackgroundLoop
from perdure.history.streams import Streams
from perdure.telemetry.propagation import untraced

DEFAULT_STREAM_RETENTION = 7 * 24 * 3600.0
MAX_SWEEP_INTERVAL = 60.0
BATCH = 100  # runs whose frames one statement deletes


def stream_retention() -> float:
    """How long a closed run's frames are kept (PERDURE_STREAM_RETENTION, seconds)."""
    raw = os.environ.get("PERDURE_STREAM_RETENTION", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STREAM_RETENTION
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise SystemExit(
            f"PERDURE_STREAM_RETENTION must be a positive number of seconds, not {raw!r}"
        )
    return value


class StreamRetention(BackgroundLoop):
    """Deletes expired frames every tenth of the retention (at most every minute)."""

    def __init__(self, streams: Streams, retention: float) -> None:
        super().__init__("stream retention", self._sweep, min(retention / 10, MAX_SWEEP_INTERVAL))
        self._streams = streams
        self._retention = retention

    async def _sweep(self) -> None:
        with untraced():
            while await self._streams.delete_expired_frames(self._retention, BATCH) == BATCH:
                pass  # more expired runs: the next batch at once
