"""Rate limits: a token bucket per API key at the gateway, and per stream for the messages a
worker sends; how many worker streams one API key may hold open; and how large a message, a
page of history and a page of a loaded journal may be. Refusals are RESOURCE_EXHAUSTED naming
the limit and when to retry (or what to change)."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator

import grpc

from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.telemetry.rpc import MAX_ITEM_BYTES, MAX_MESSAGE_BYTES


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

    def has_token(self) -> bool:
        """Whether a token is there now (none is taken)."""
        if self.rate <= 0:
            return True
        elapsed = time.monotonic() - self._stamp
        return min(self.burst, self._tokens + elapsed * self.rate) >= 1

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
                Reason.RATE_LIMITED,
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
                Reason.STREAM_MESSAGE_RATE_EXCEEDED,
                f"the {self._stream} stream sent more than {self._bucket.rate:g} messages per "
                f"second (PERDURE_STREAM_MESSAGE_RATE); it is closed, reconnect",
            )


def count_setting(variable: str, default: int) -> int:
    """A whole number from the environment (0 turns the cap off)."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise SystemExit(f"{variable} must be a whole number (0: no cap), not {raw!r}")
    return int(raw)


class OpenCap:
    """The streams of one kind each holder (an API key, or an address) holds open on this
    replica, up to the cap read from `variable` (0: no cap): one more is refused with
    RESOURCE_EXHAUSTED, `reason`, naming the cap and what to do."""

    def __init__(self, variable: str, default: int, what: str, reason: str, advice: str) -> None:
        self.cap = count_setting(variable, default)
        self._variable = variable
        self._what = what
        self._reason = reason
        self._advice = advice
        self._open: Counter[str] = Counter()

    def hold(self, holder: str | None) -> contextlib.AbstractContextManager[None]:
        """Count one more open stream of `holder` until the returned context is left (enter it
        at once); RESOURCE_EXHAUSTED when it holds `cap` of them already. None: nothing to
        count by."""
        if holder is None or self.cap <= 0:
            return contextlib.nullcontext()
        if self._open[holder] >= self.cap:
            raise exhausted(
                self._reason,
                f"{holder} already holds {self.cap} open {self._what} on this replica, the cap "
                f"({self._variable}={self.cap}); {self._advice}",
            )
        self._open[holder] += 1
        return self._counted(holder)

    @contextlib.contextmanager
    def _counted(self, holder: str) -> Iterator[None]:
        try:
            yield
        finally:
            self._open[holder] -= 1
            if not self._open[holder]:
                del self._open[holder]


# A worker process holds one TaskService.Connect stream and one JournalService.Session stream
# (two for a moment while it moves to another replica), so this is 64 worker processes per key
# on each replica: a fleet that shares one key spreads over the replicas, and a bigger one
# gets keys of its own or a higher cap. Every session costs the scheduler a claim query per
# grant round: the cap bounds what one key can cost the database.
DEFAULT_SESSIONS_PER_KEY = 64


def sessions_per_key(stream: str) -> OpenCap:
    """The cap on one kind of worker stream per API key (PERDURE_SESSIONS_PER_KEY)."""
    return OpenCap(
        "PERDURE_SESSIONS_PER_KEY",
        DEFAULT_SESSIONS_PER_KEY,
        f"{stream} streams",
        Reason.SESSIONS_PER_KEY_EXCEEDED,
        "close one, give each worker pool a key of its own, or raise the cap",
    )


# A client's open watches (WatchWorkflow, ReadStream) per API key on each replica: a UI or a
# service following many runs at once, each stream costing a task and a wake-up, no polling.
DEFAULT_WATCHES_PER_KEY = 1000
WATCH_METHODS = frozenset({"WatchWorkflow", "ReadStream"})


def watches_per_key(stream: str) -> OpenCap:
    """The cap on one kind of a client's watch streams per API key (PERDURE_WATCHES_PER_KEY)."""
    return OpenCap(
        "PERDURE_WATCHES_PER_KEY",
        DEFAULT_WATCHES_PER_KEY,
        f"{stream} streams",
        Reason.SESSIONS_PER_KEY_EXCEEDED,
        "close one, or raise the cap",
    )


# -- message sizes ---------------------------------------------------------------------------

# A page of history stops at this many bytes of events (at least one event a page, and one
# event is at most a few payloads): a page always fits in a message.
HISTORY_PAGE_BYTES = MAX_MESSAGE_BYTES // 4
# A description shows step outputs up to this many bytes in all (later ones are left out, and
# marked so): it fits in a message, with room for the rest of the run.
DESCRIBED_OUTPUT_BYTES = MAX_MESSAGE_BYTES // 2


# A page of a worker's journal load stops at this many bytes (at least one event a page): well
# under the message limit, so a journal of any size loads, a page at a time.
DEFAULT_JOURNAL_PAGE_BYTES = 4 * 1024 * 1024
# A payload this large or larger is stored once by content, and named in its event by its digest.
DEFAULT_PAYLOAD_REF_BYTES = 16 * 1024


def journal_page_bytes() -> int:
    """The bytes of events a page of LoadJournal holds at most (PERDURE_JOURNAL_PAGE_BYTES,
    at most a quarter of the message limit); one event alone may go over it."""
    value = count_setting("PERDURE_JOURNAL_PAGE_BYTES", DEFAULT_JOURNAL_PAGE_BYTES)
    if not 0 < value <= MAX_ITEM_BYTES // 4:
        raise SystemExit(f"PERDURE_JOURNAL_PAGE_BYTES must be between 1 and {MAX_ITEM_BYTES // 4}")
    return value


def payload_ref_bytes() -> int:
    """The size from which an event's payload is stored by content and reaches workers as a
    PayloadRef (PERDURE_PAYLOAD_REF_BYTES)."""
    value = count_setting("PERDURE_PAYLOAD_REF_BYTES", DEFAULT_PAYLOAD_REF_BYTES)
    if value <= 0:
        raise SystemExit("PERDURE_PAYLOAD_REF_BYTES must be 1 or more")
    return value


def too_large(what: str, size: int, limit: int) -> errors.ApiError:
    """One answer that would not fit in a message: that call fails, alone."""
    return exhausted(
        Reason.MESSAGE_TOO_LARGE, f"{what} is {size} bytes, over the {limit}-byte message limit"
    )
