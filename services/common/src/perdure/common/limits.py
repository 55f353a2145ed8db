"""Rate limits: a token bucket per API key at the gateway, and per stream for the messages a
worker sends. Refusals are RESOURCE_EXHAUSTED naming the limit and when to retry."""

from __future__ import annotations

import os
import time

import grpc

from perdure.common import errors


def rate_setting(variable: str, default: float) -> float:
    """A positive rate from the environment (0 turns the limit off)."""
    raw = os.environ.get(variable, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{variable} must be a number per second, not {raw!r}") from None
    if value < 0:
        raise SystemExit(f"{variable} must not be negative")
    return value


class TokenBucket:
    """`rate` events per second on average, bursts of up to `burst`; a rate of 0 allows all."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(rate * 2, 1.0)
        self._tokens = self.burst
        self._stamp = time.monotonic()

    def wait_needed(self) -> float:
        """Take one token: 0.0 when there was one, else the seconds until there will be."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate


def exhausted(reason: str, message: str) -> errors.ApiError:
    """A limit was reached."""
    return errors.ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, reason, message)


class KeyedLimits:
    """One bucket per key (an API key id, or a peer when authentication is off)."""

    MAX_KEYS = 100_000

    def __init__(self, rate: float, what: str) -> None:
        self._rate = rate
        self._what = what
        self._buckets: dict[str, TokenBucket] = {}

    def take(self, key: str) -> None:
        """Count one call of `key`; RESOURCE_EXHAUSTED over the limit."""
        if self._rate <= 0:
            return
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.MAX_KEYS:
                self._buckets.clear()  # bounded memory, whatever callers invent
            bucket = self._buckets[key] = TokenBucket(self._rate)
        wait = bucket.wait_needed()
        if wait > 0:
            raise exhausted(
                "RATE_LIMITED",
                f"{self._what} {key} is over its limit of {self._rate:g} calls per second; "
                f"retry in {wait * 1000:.0f} ms",
            )


class StreamCap:
    """The messages one stream may send: RESOURCE_EXHAUSTED past `rate` per second."""

    def __init__(self, rate: float, stream: str) -> None:
        self._bucket = TokenBucket(rate)
        self._stream = stream

    def count(self) -> None:
        """Count one message received on the stream."""
        if self._bucket.wait_needed() > 0:
            raise exhausted(
                "STREAM_MESSAGE_RATE_EXCEEDED",
                f"the {self._stream} stream sent more than {self._bucket.rate:g} messages per "
                f"second (PERDURE_STREAM_MESSAGE_RATE); it is closed, reconnect",
            )
