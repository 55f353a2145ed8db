"""When a watch or a stream read is opened again after its call broke: at once after progress,
then backing off, until RECONNECT_SECONDS go by without a message."""

from __future__ import annotations

import time

import grpc

from perdure.client._errors import api_error

RECONNECT_SECONDS = 60.0
# What a call can end with that a new call, from the last position seen, may get past.
TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL})


class Reconnect:
    """The delay before the next attempt, or the error to raise instead."""

    def __init__(self) -> None:
        self._delay = 0.0
        self._since = time.monotonic()

    def progressed(self) -> None:
        """A message arrived: the next break reconnects at once."""
        self._delay = 0.0
        self._since = time.monotonic()

    def delay(self, error: grpc.RpcError | None) -> float:
        """Seconds to wait before reconnecting after `error` (None: the call ended without its
        last message); raise the typed error when it is not transient or too long has gone by
        without progress."""
        stalled = time.monotonic() - self._since > RECONNECT_SECONDS
        if error is not None:
            code = error.code() if hasattr(error, "code") else None
            if code not in TRANSIENT or stalled:
                raise api_error(error) from error
        elif stalled:
            raise ConnectionError(f"the call kept ending early for {RECONNECT_SECONDS:.0f}s")
        delay = self._delay
        self._delay = min(max(self._delay * 2, 0.05), 1.0)
        return delay
