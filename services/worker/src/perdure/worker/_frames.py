"""Frames: the chunks one step attempt emits (`current_step().emit(chunk)`), sent to history
with EmitFrames on the journal session.

emit() does not wait for history: it encodes the chunk, numbers it per (attempt, stream) from
0, and queues it (only a sync body's thread waits, and only while the buffer is full). One
sender per attempt sends what is queued at once when nothing is in flight, and while a batch
is in flight the chunks emitted meanwhile wait for the next one: the first chunk leaves
immediately, and a fast emitter fills large batches. A batch is sent again, with the same
first_index, until it is answered (history stores it once). The attempt's outcome is recorded
only after flush(): every chunk it emitted is stored before its step is closed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker._errors import JournalUnavailableError, LeaseLostError, StreamBufferFullError
from perdure.worker._payload import BINARY, to_payload

log = logging.getLogger("perdure.worker")

DEFAULT_STREAM = "output"
MAX_STREAM_NAME = 200
# History's limit on one payload.
MAX_CHUNK_BYTES = 2 * 1024 * 1024
# Chunks queued and not yet answered, per attempt: past either bound, emit() from a sync
# body's thread waits until a batch is answered; from the event loop (an async body, which
# cannot wait there without stopping the sender too) it raises StreamBufferFullError.
MAX_BUFFERED_CHUNKS = 50_000
MAX_BUFFERED_BYTES = 32 * 1024 * 1024
# One EmitFrames request holds at most this much (at least one chunk).
MAX_BATCH_CHUNKS = 1_000  # history takes at most 1,000 chunks a call
MAX_BATCH_BYTES = 1024 * 1024
# A batch left unanswered by an unreachable history is sent again this many times.
RESENDS = 3
RESEND_BACKOFF_SECONDS = 0.5

Record = Callable[[Any], Awaitable[Any]]


@dataclass
class _Stream:
    """One stream's chunks of the attempt: those numbered and not yet answered."""

    name: str
    answered: int = 0  # chunks [0, answered) are stored
    queued: list[Payload] = field(default_factory=list)  # chunks answered + 0, 1, ...

    def next_batch(self) -> list[Payload]:
        """Take the next batch to send (within the batch bounds, at least one chunk)."""
        size = 0
        taken = 0
        for chunk in self.queued[:MAX_BATCH_CHUNKS]:
            size += len(chunk.data)
            if taken and size > MAX_BATCH_BYTES:
                break
            taken += 1
        return self.queued[:taken]


class Frames:
    """The emitter of one attempt: emit() from the body (any thread), flush() before the
    attempt's outcome is recorded."""

    def __init__(self, record: Record, step_id: str, attempt: int, step_task: bool) -> None:
        self._record = record
        self._step_id = step_id
        self._attempt = attempt
        self._step_task = step_task  # sent under a step task's lease
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()  # the body's thread emits while the loop sends
        self._room = threading.Condition(self._lock)  # notified as batches are answered
        self._streams: dict[str, _Stream] = {}
        self._chunks = 0  # queued over all streams
        self._bytes = 0
        self._sender: asyncio.Task[None] | None = None
        self._waking = False  # a sender runs or is about to start
        self._closed = False  # flushed: the attempt is over
        self._fenced = False  # history refused a batch: nothing more is sent
        self._error: BaseException | None = None  # why sending stopped, raised by flush()

    def emit(self, chunk: Any, stream: str = DEFAULT_STREAM) -> None:
        """Queue `chunk` (a JSON value) on `stream`; from the body's thread or the loop."""
        _check_stream(stream)
        payload = to_payload(chunk)
        if payload.encoding == BINARY:
            raise TypeError("a chunk is a JSON value (str for text), not bytes")
        if len(payload.data) > MAX_CHUNK_BYTES:
            raise ValueError(
                f"the chunk is {len(payload.data)} bytes encoded; the limit is "
                f"{MAX_CHUNK_BYTES} bytes"
            )
        on_loop = _on_loop(self._loop)
        with self._room:
            if not on_loop:  # a sync body's thread waits for room (the loop sends meanwhile)
                self._room.wait_for(self._has_room)
            if self._closed:
                raise RuntimeError(
                    f"attempt {self._attempt} of step {self._step_id!r} is over: its frames "
                    "were flushed and no more can be emitted"
                )
            if self._fenced:  # the attempt's own record will be refused as well
                return
            if self._error is not None:
                raise self._error
            if not self._has_room():
                raise StreamBufferFullError(
                    f"{self._chunks} chunks ({self._bytes} bytes) emitted by step "
                    f"{self._step_id!r} are not yet stored by history (the limits are "
                    f"{MAX_BUFFERED_CHUNKS} chunks and {MAX_BUFFERED_BYTES} bytes): an async "
                    "step must let the event loop run between emits (await something), or "
                    "emit larger chunks"
                )
            queue = self._streams.get(stream)
            if queue is None:
                queue = self._streams[stream] = _Stream(stream)
            queue.queued.append(payload)
            self._chunks += 1
            self._bytes += len(payload.data)
            if self._waking:
                return
            self._waking = True
        if on_loop:
            self._start()
        else:
            self._loop.call_soon_threadsafe(self._start)

    def _has_room(self) -> bool:
        """Whether another chunk may be queued, or emit() must not wait (it returns or raises
        at once). Called under the lock."""
        full = self._chunks >= MAX_BUFFERED_CHUNKS or self._bytes >= MAX_BUFFERED_BYTES
        return not full or self._closed or self._fenced or self._error is not None

    async def flush(self) -> None:
        """Wait until every chunk emitted so far is stored, then refuse later ones. Raises
        JournalUnavailableError when history could not be reached, JournalRejectedError when
        it refused a batch as invalid; returns quietly when the attempt was fenced out (its
        record will be refused too)."""
        with self._room:
            self._closed = True
            self._room.notify_all()  # a thread still waiting for room gets its error
        while self._waking:
            sender = self._sender
            if sender is None or sender.done():
                await asyncio.sleep(0)  # a start called from the body's thread runs first
            else:
                await asyncio.wait([sender])
        if self._error is not None:
            raise self._error

    def _start(self) -> None:
        # Called once per idle period (`_waking`): an earlier sender has nothing left to do.
        self._sender = asyncio.create_task(self._send_all())

    async def _send_all(self) -> None:
        try:
            await self._send_batches()
        except BaseException as error:  # cancelled with the loop: the attempt cannot go on
            self._stop(error)
            with self._lock:
                self._waking = False
            raise

    async def _send_batches(self) -> None:
        """Send batches until nothing is queued: one batch per stream at a time."""
        while True:
            with self._lock:
                pending = [s for s in self._streams.values() if s.queued]
                if not pending or self._fenced or self._error is not None:
                    self._waking = False  # under the lock: a later emit starts a sender
                    return
                batches = [(s, s.next_batch()) for s in pending]
            outcomes = await asyncio.gather(
                *(self._send(s, chunks) for s, chunks in batches), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, LeaseLostError):
                    log.info(
                        "frames of step %s attempt %d refused: %s",
                        self._step_id,
                        self._attempt,
                        outcome,
                    )
                    self._stop(None)
                elif isinstance(outcome, BaseException):
                    self._stop(outcome)

    async def _send(self, stream: _Stream, chunks: list[Payload]) -> None:
        request = jpb.EmitFramesRequest(
            step_id=self._step_id,
            attempt=self._attempt,
            stream=stream.name,
            first_index=stream.answered,
            chunks=chunks,
            step_task=self._step_task,
        )
        for resend in range(RESENDS + 1):
            try:
                await self._record(request)
                break
            except JournalUnavailableError:
                # The session re-sent it a few times already; history stores a batch once.
                if resend == RESENDS:
                    raise
                await asyncio.sleep(RESEND_BACKOFF_SECONDS * 2**resend)
        with self._room:
            if self._fenced or self._error is not None:
                return  # the queues were dropped
            del stream.queued[: len(chunks)]
            stream.answered += len(chunks)
            self._chunks -= len(chunks)
            self._bytes -= sum(len(chunk.data) for chunk in chunks)
            self._room.notify_all()

    def _stop(self, error: BaseException | None) -> None:
        """Send nothing more: fenced out (`error` None) or failed with `error`."""
        with self._room:
            if error is None:
                self._fenced = True
            elif self._error is None:
                self._error = error
            for stream in self._streams.values():
                stream.queued.clear()
            self._chunks = self._bytes = 0
            self._room.notify_all()


def _check_stream(stream: str) -> None:
    if not isinstance(stream, str) or not stream:
        raise ValueError(f"a stream name is a non-empty str, not {stream!r}")
    if len(stream) > MAX_STREAM_NAME or not stream.isprintable():
        raise ValueError(
            f"stream name {stream[:50]!r} is not 1 to {MAX_STREAM_NAME} printable characters"
        )


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # a sync body's thread
        return False
