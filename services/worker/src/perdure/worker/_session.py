"""A worker's journal calls, all on one JournalService.Session stream to history.

In Python gRPC a unary call costs about four times a message on an open stream, and every
step of every workflow is a journal call: one stream per worker process carries them all,
matched by id. Journal calls are idempotent, so calls left unanswered by a broken stream are
sent again on a new one, a few times, as a unary channel's retry policy would; so are calls
history answered UNAVAILABLE (its database failed the call for a passing reason: a lost
connection, a deadlock), instead of giving the run up to its lease's expiry. One run's call
never breaks the stream the others share: a call too large for a message fails alone, here,
and history answers a call whose answer is too large with an error of its own.

A stream moves after about STREAM_MAX_AGE_SECONDS: new calls go on a new one, which the
channel's round-robin opens on another history replica, and the old one is closed once its
calls are answered. So history replicas started later get their share of the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.trace import SpanKind

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.telemetry.propagation import current_carrier
from perdure.telemetry.rpc import MAX_ITEM_BYTES, multiplexed_call_span
from perdure.worker._errors import PerdureError

SERVICE = jpb.DESCRIPTOR.services_by_name["JournalService"].full_name
ATTEMPTS = 5
FIRST_BACKOFF_SECONDS = 0.1
STREAM_MAX_AGE_SECONDS = 300.0
# Request message name -> its field in JournalCall (and its answer's in JournalAnswer).
_FIELDS = {
    request.message_type.full_name: request.name
    for request in jpb.JournalCall.DESCRIPTOR.oneofs_by_name["call"].fields
    if request.message_type is not None
}
_Stream = grpc.aio.StreamStreamCall[jpb.SessionRequest, jpb.SessionResponse]


class JournalCallError(PerdureError, Exception):
    """A journal call failed: the status (and ErrorInfo reason) a unary call would carry."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str = "") -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class _StreamBrokenError(Exception):
    """The stream ended before the call was answered."""


@dataclass(eq=False)
class _Connection:
    """One Session stream: the calls waiting to be written, and those waiting for answers."""

    stream: _Stream
    outgoing: list[jpb.JournalCall] = field(default_factory=list)
    unanswered: dict[int, asyncio.Future[jpb.JournalAnswer]] = field(default_factory=dict)
    writer: asyncio.Task[None] | None = None
    reader: asyncio.Task[None] | None = None
    retire_at: float = 0.0  # monotonic clock: new calls go to a new stream from then on


class JournalSession:
    """Sends journal calls on one stream, opening a new one whenever the last one broke.

    Calls made while a message is being written go together in the next message.
    """

    def __init__(
        self,
        stub: jgrpc.JournalServiceStub,
        max_age: float = STREAM_MAX_AGE_SECONDS,
        build_id: str = "",
    ) -> None:
        self._stub = stub
        self.build_id = build_id  # the worker's, which a run's first load records
        self._max_age = max_age
        self._connection: _Connection | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    async def call(self, request: Message, timeout: float) -> Any:  # noqa: ASYNC109
        """Send `request` (a JournalService request message) and return its answer; raise
        JournalCallError with the status the unary method would have failed with."""
        field_name = _FIELDS[request.DESCRIPTOR.full_name]
        method = request.DESCRIPTOR.name.removesuffix("Request")
        with multiplexed_call_span(SERVICE, method, SpanKind.CLIENT):
            call = jpb.JournalCall(trace_context=current_carrier())
            getattr(call, field_name).CopyFrom(request)
            if isinstance(request, jpb.LoadJournalRequest):
                call.load_journal.build_id = self.build_id  # a run's first load records it
            size = call.ByteSize()
            if size > MAX_ITEM_BYTES:
                # Sent, it would break the stream every other run's calls share.
                raise JournalCallError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{method} is {size} bytes, over the {MAX_ITEM_BYTES}-byte message limit",
                    "MESSAGE_TOO_LARGE",
                )
            try:
                async with asyncio.timeout(timeout):
                    answer = await self._send_with_retries(call)
            except TimeoutError:
                raise JournalCallError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer to {method} in {timeout}s"
                ) from None
        if answer.HasField("error"):
            error = answer.error
            raise JournalCallError(_status_code(error.code), error.message, error.reason)
        return getattr(answer, field_name)

    async def close(self) -> None:
        """End the stream; calls still unanswered fail."""
        for retiring in self._retiring:
            retiring.cancel()
        connection = self._connection
        if connection is not None:
            connection.stream.cancel()
            if connection.reader is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await connection.reader

    async def _send_with_retries(self, call: jpb.JournalCall) -> jpb.JournalAnswer:
        backoff = FIRST_BACKOFF_SECONDS
        for _ in range(ATTEMPTS - 1):
            with contextlib.suppress(_StreamBrokenError):
                answer = await self._send(call)
                if not _passing(answer):
                    return answer
            await asyncio.sleep(backoff)
            backoff *= 2
        try:
            return await self._send(call)
        except _StreamBrokenError as error:
            raise JournalCallError(grpc.StatusCode.UNAVAILABLE, str(error)) from None

    async def _send(self, call: jpb.JournalCall) -> jpb.JournalAnswer:
        connection = self._open()
        call.id = next(self._ids)
        answer: asyncio.Future[jpb.JournalAnswer] = asyncio.get_running_loop().create_future()
        connection.unanswered[call.id] = answer
        connection.outgoing.append(call)
        if connection.writer is None or connection.writer.done():
            connection.writer = asyncio.create_task(self._write(connection))
        try:
            return await answer
        finally:
            connection.unanswered.pop(call.id, None)

    def _open(self) -> _Connection:
        old = self._connection
        if old is not None and time.monotonic() >= old.retire_at:
            self._connection = None
            retiring = asyncio.create_task(self._retire(old))
            self._retiring.add(retiring)
            retiring.add_done_callback(self._retiring.discard)
        if self._connection is None:
            connection = _Connection(self._stub.Session())
            # Give or take a tenth, so that streams opened together do not all move together.
            connection.retire_at = time.monotonic() + self._max_age * random.uniform(0.9, 1.1)
            connection.reader = asyncio.create_task(self._read(connection))
            self._connection = connection
        return self._connection

    async def _retire(self, connection: _Connection) -> None:
        """Half-close a stream that takes no new calls, once its calls are written and
        answered; history then ends it."""
        if connection.writer is not None:
            await connection.writer
        unanswered = list(connection.unanswered.values())
        if unanswered:
            await asyncio.wait(unanswered)
        with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError):
            await connection.stream.done_writing()

    async def _write(self, connection: _Connection) -> None:
        while connection.outgoing:
            calls = _next_message(connection.outgoing)
            try:
                await connection.stream.write(jpb.SessionRequest(calls=calls))
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                self._broken(connection, "the journal stream to history broke")
                return

    async def _read(self, connection: _Connection) -> None:
        """Hand each answer to its caller until the stream ends; then fail the rest."""
        reason = "history closed the journal stream"
        try:
            while isinstance(message := await connection.stream.read(), jpb.SessionResponse):
                for answer in message.answers:
                    waiting = connection.unanswered.get(answer.id)
                    if waiting is not None and not waiting.done():
                        waiting.set_result(answer)
        except grpc.aio.AioRpcError as error:
            reason = f"the journal stream to history broke: {error.code().name}"
        finally:
            self._broken(connection, reason)

    def _broken(self, connection: _Connection, reason: str) -> None:
        """Give up on a stream: its unanswered calls fail (to be sent again on a new one)."""
        if self._connection is connection:
            self._connection = None
        connection.stream.cancel()  # ends the reader, if the writer noticed first
        connection.outgoing.clear()
        for waiting in connection.unanswered.values():
            if not waiting.done():
                waiting.set_exception(_StreamBrokenError(reason))


def _next_message(outgoing: list[jpb.JournalCall]) -> list[jpb.JournalCall]:
    """Take from `outgoing` the calls of the next message: as many as fit the message limit
    (at least one; each call fits alone)."""
    room = MAX_ITEM_BYTES
    taken = 0
    for call in outgoing:
        room -= call.ByteSize()
        if taken and room < 0:
            break
        taken += 1
    calls = outgoing[:taken]
    del outgoing[:taken]
    return calls


def _passing(answer: jpb.JournalAnswer) -> bool:
    """Whether history answered that the call failed for a passing reason (UNAVAILABLE)."""
    return answer.HasField("error") and answer.error.code == grpc.StatusCode.UNAVAILABLE.value[0]


def _status_code(number: int) -> grpc.StatusCode:
    """The status code of a number (UNKNOWN for a number it does not know)."""
    return next(
        (code for code in grpc.StatusCode if code.value[0] == number), grpc.StatusCode.UNKNOWN
    )
