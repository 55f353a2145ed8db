"""The journal session: JournalService.Session multiplexes a worker's journal calls on one
stream. Each call runs as its unary method (journal_api.py), concurrently with the others; the
answers ready together leave in one message."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import psycopg
from opentelemetry.trace import SpanKind, Status, StatusCode

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.common import errors, limits
from perdure.common.lease_proofs import LeaseProofs
from perdure.common.limits import StreamCap
from perdure.history.journal import Journal
from perdure.history.journal_api import JournalApi
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc
from perdure.telemetry.propagation import context_from
from perdure.telemetry.rpc import MAX_ITEM_BYTES, multiplexed_call_span

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
JOURNAL_SERVICE = jpb.DESCRIPTOR.services_by_name["JournalService"].full_name


class JournalSessions(JournalApi):
    """JournalService's unary calls, and the same calls on Session streams."""

    def __init__(
        self,
        journal: Journal,
        call_rate: float,
        scheduler: sgrpc.SchedulerServiceStub,
        proofs: LeaseProofs | None = None,
    ) -> None:
        super().__init__(journal, scheduler, proofs)
        self._call_rate = call_rate  # per Session stream, calls per second
        self._session_readers: set[asyncio.Task[None]] = set()

    def close_sessions(self) -> None:
        """Stop taking calls on open sessions; each ends once its calls taken are answered.
        Workers send what is left on a new stream (to another replica, or after a restart)."""
        for reader in self._session_readers:
            reader.cancel()

    async def Session(
        self, request_iterator: Any, context: Context
    ) -> AsyncIterator[jpb.SessionResponse]:
        """The unary calls on one stream: each runs as its unary method, concurrently with
        the others; the answers ready together leave in one message."""
        answers: asyncio.Queue[jpb.JournalAnswer | None] = asyncio.Queue()
        calls: set[asyncio.Task[None]] = set()
        refused: list[errors.ApiError] = []  # a message that is not a SessionRequest
        cap = StreamCap(self._call_rate, "JournalService.Session")

        async def answer(call: jpb.JournalCall) -> None:
            answers.put_nowait(await self._answer(call, context))

        async def read() -> None:
            try:
                while (request := await context.read()) is not grpc.aio.EOF:
                    for call in request.calls:
                        cap.count()
                        task = asyncio.create_task(answer(call))
                        calls.add(task)
                        task.add_done_callback(calls.discard)
            except asyncio.CancelledError:
                pass  # closing: answer the calls taken, then end the stream
            except errors.ApiError as error:
                refused.append(error)  # answer the calls taken, then end with the error
            if calls:
                await asyncio.wait(set(calls))
            answers.put_nowait(None)

        reader = asyncio.create_task(read())
        self._session_readers.add(reader)
        reader.add_done_callback(self._session_readers.discard)
        try:
            finished = False
            while not finished:
                ready = [await answers.get()]
                while not answers.empty():
                    ready.append(answers.get_nowait())
                finished = ready[-1] is None  # the reader's last word
                for batch in _batches([answer for answer in ready if answer is not None]):
                    yield jpb.SessionResponse(answers=batch)
            if refused:
                await errors.abort_with(context, refused[0])
        finally:
            reader.cancel()
            for task in calls:
                task.cancel()

    async def _answer(self, call: jpb.JournalCall, context: Context) -> jpb.JournalAnswer:
        answer = jpb.JournalAnswer(id=call.id)
        field = call.WhichOneof("call")
        if field is None:
            error = errors.invalid_argument("a journal call needs one request, e.g. record_step")
            answer.error.CopyFrom(_session_error(error))
            return answer
        method, handler = _SESSION_CALLS[field]
        request = getattr(call, field)
        parent = context_from(call.trace_context)
        with multiplexed_call_span(JOURNAL_SERVICE, method, SpanKind.SERVER, parent) as span:
            try:
                getattr(answer, field).CopyFrom(await handler(self, request, context))
            except errors.ApiError as error:
                answer.error.CopyFrom(_session_error(error))
            except psycopg.OperationalError as error:
                log.warning("journal call %s: %s", method, error)
                answer.error.CopyFrom(_session_error(errors.database_unavailable(error)))
            except Exception as error:
                log.exception("journal call %s failed", method)
                unknown = errors.ApiError(grpc.StatusCode.UNKNOWN, "", f"{method} failed: {error}")
                answer.error.CopyFrom(_session_error(unknown))
            if answer.HasField("error"):
                span.set_status(Status(StatusCode.ERROR, answer.error.message))
        return answer


def _session_calls() -> dict[str, tuple[str, Any]]:
    """JournalCall's field -> the method it calls and that method's unary handler, without its
    status mapping (errors are answered on the stream): looked up once, not per call."""
    calls = {}
    for request in jpb.JournalCall.DESCRIPTOR.oneofs_by_name["call"].fields:
        if request.message_type is None:
            continue  # every field of the oneof is a request message
        method = request.message_type.name.removesuffix("Request")
        calls[request.name] = (method, inspect.unwrap(getattr(JournalApi, method)))
    return calls


_SESSION_CALLS = _session_calls()


def _batches(answers: list[jpb.JournalAnswer]) -> Iterator[list[jpb.JournalAnswer]]:
    """The answers in messages that each fit the message limit. An answer too large for any
    message fails alone (one run's call never costs the stream, and so the worker's other
    runs, anything)."""
    batch: list[jpb.JournalAnswer] = []
    room = MAX_ITEM_BYTES
    for answer in answers:
        size = answer.ByteSize()
        if size > MAX_ITEM_BYTES:
            what = f"the answer to journal call {answer.id}"
            refused = jpb.JournalAnswer(id=answer.id)
            refused.error.CopyFrom(_session_error(limits.too_large(what, size, MAX_ITEM_BYTES)))
            answer, size = refused, refused.ByteSize()
        if batch and size > room:
            yield batch
            batch, room = [], MAX_ITEM_BYTES
        batch.append(answer)
        room -= size
    if batch:
        yield batch


def _session_error(error: errors.ApiError) -> jpb.SessionError:
    return jpb.SessionError(code=error.code.value[0], message=error.message, reason=error.reason)
