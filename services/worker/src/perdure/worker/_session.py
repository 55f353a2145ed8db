"""A worker's journal calls, all on one JournalService.Session stream to history.

In Python gRPC a unary call costs about four times a message on an open stream, and every
step of every workflow is a journal call: one stream per worker process carries them all,
matched by id. Journal calls are idempotent, so calls left unanswered by a broken stream are
sent again on a new one, a few times, as a unary channel's retry policy would.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.trace import SpanKind

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.telemetry.propagation import current_carrier
from perdure.telemetry.rpc import multiplexed_call_span

SERVICE = "perdure.api.worker.v1.JournalService"
ATTEMPTS = 5
FIRST_BACKOFF_SECONDS = 0.1
# Request message name -> its field in SessionRequest (and its answer's in SessionResponse).
_FIELDS = {
    field.message_type.full_name: field.name
    for field in jpb.SessionRequest.DESCRIPTOR.oneofs_by_name["call"].fields
    if field.message_type is not None
}
_Stream = grpc.aio.StreamStreamCall[jpb.SessionRequest, jpb.SessionResponse]


class JournalCallError(Exception):
    """A journal call failed: the status (and ErrorInfo reason) a unary call would carry."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str = "") -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class _StreamBrokenError(Exception):
    """The stream ended before the call was answered."""


@dataclass(eq=False)
class _Pending:
    stream: _Stream
    answer: asyncio.Future[jpb.SessionResponse]


class JournalSession:
    """Sends journal calls on one stream, opening a new one whenever the last one broke."""

    def __init__(self, stub: jgrpc.JournalServiceStub) -> None:
        self._stub = stub
        self._stream: _Stream | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()

    async def call(self, request: Message, timeout: float) -> Any:  # noqa: ASYNC109
        """Send `request` (a JournalService request message) and return its answer; raise
        JournalCallError with the status the unary method would have failed with."""
        field = _FIELDS[request.DESCRIPTOR.full_name]
        method = request.DESCRIPTOR.name.removesuffix("Request")
        with multiplexed_call_span(SERVICE, method, SpanKind.CLIENT):
            message = jpb.SessionRequest(trace_context=current_carrier())
            getattr(message, field).CopyFrom(request)
            try:
                async with asyncio.timeout(timeout):
                    answer = await self._send_with_retries(message)
            except TimeoutError:
                raise JournalCallError(
                    grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer to {method} in {timeout}s"
                ) from None
        if answer.HasField("error"):
            error = answer.error
            raise JournalCallError(_status_code(error.code), error.message, error.reason)
        return getattr(answer, field)

    async def close(self) -> None:
        """End the stream; calls still unanswered fail."""
        if self._stream is not None:
            self._stream.cancel()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def _send_with_retries(self, message: jpb.SessionRequest) -> jpb.SessionResponse:
        backoff = FIRST_BACKOFF_SECONDS
        for _ in range(ATTEMPTS - 1):
            with contextlib.suppress(_StreamBrokenError):
                return await self._send(message)
            await asyncio.sleep(backoff)
            backoff *= 2
        try:
            return await self._send(message)
        except _StreamBrokenError as error:
            raise JournalCallError(grpc.StatusCode.UNAVAILABLE, str(error)) from None

    async def _send(self, message: jpb.SessionRequest) -> jpb.SessionResponse:
        stream = self._open()
        message.id = next(self._ids)
        pending = _Pending(stream, asyncio.get_running_loop().create_future())
        self._pending[message.id] = pending
        try:
            async with self._write_lock:
                try:
                    await stream.write(message)
                except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                    raise _StreamBrokenError("the journal stream to history broke") from None
            return await pending.answer
        finally:
            del self._pending[message.id]

    def _open(self) -> _Stream:
        if self._stream is None:
            self._stream = self._stub.Session()
            self._reader = asyncio.create_task(self._read(self._stream))
        return self._stream

    async def _read(self, stream: _Stream) -> None:
        """Hand each answer to its caller until the stream ends; then fail the rest."""
        reason = "history closed the journal stream"
        try:
            while isinstance(answer := await stream.read(), jpb.SessionResponse):
                pending = self._pending.get(answer.id)
                if pending is not None and not pending.answer.done():
                    pending.answer.set_result(answer)
        except grpc.aio.AioRpcError as error:
            reason = f"the journal stream to history broke: {error.code().name}"
        finally:
            if self._stream is stream:
                self._stream = None
            for pending in list(self._pending.values()):
                if pending.stream is stream and not pending.answer.done():
                    pending.answer.set_exception(_StreamBrokenError(reason))


def _status_code(number: int) -> grpc.StatusCode:
    """The status code of a number (UNKNOWN for a number it does not know)."""
    return next(
        (code for code in grpc.StatusCode if code.value[0] == number), grpc.StatusCode.UNKNOWN
    )
