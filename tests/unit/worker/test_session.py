"""The worker's journal session over real gRPC, against a scripted JournalService server:
answers matched by id, errors as statuses, calls sent again when a stream breaks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.worker import _session
from perdure.worker._session import JournalCallError, JournalSession

Answer = Callable[[jpb.SessionRequest, int], jpb.SessionResponse | None]


class ScriptedJournal(jgrpc.JournalServiceServicer):
    """Answers each session request with `answer(request, stream number)`; None breaks the
    stream without answering."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.streams = 0
        self.received: list[tuple[int, jpb.SessionRequest]] = []

    async def Session(
        self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[jpb.SessionResponse]:
        self.streams += 1
        stream = self.streams
        batch: list[jpb.SessionRequest] = []
        async for request in request_iterator:
            self.received.append((stream, request))
            batch.append(request)
            if len(batch) < 3 and request.record_step.step_id.startswith("batch"):
                continue  # hold the first ones, to answer out of order
            for held in reversed(batch):
                response = self.answer(held, stream)
                if response is None:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
                yield response
            batch.clear()


async def serve(journal: ScriptedJournal) -> tuple[grpc.aio.Server, JournalSession]:
    server = grpc.aio.server()
    jgrpc.add_JournalServiceServicer_to_server(journal, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return server, JournalSession(jgrpc.JournalServiceStub(channel))


def record(step_id: str) -> jpb.RecordStepRequest:
    return jpb.RecordStepRequest(workflow_id="wf", fence=1, step_id=step_id, step_name="s")


def event_id_of(request: jpb.SessionRequest, stream: int) -> jpb.SessionResponse:
    event_id = int(request.record_step.step_id.removeprefix("batch"))
    return jpb.SessionResponse(id=request.id, record_step=jpb.RecordStepResponse(event_id=event_id))


async def test_answers_reach_their_callers_whatever_their_order() -> None:
    journal = ScriptedJournal(event_id_of)
    server, session = await serve(journal)
    try:
        answers = await asyncio.gather(*(session.call(record(f"batch{n}"), 10) for n in (1, 2, 3)))
        assert [a.event_id for a in answers] == [1, 2, 3]
        assert journal.streams == 1  # one stream for every call
    finally:
        await session.close()
        await server.stop(None)


async def test_an_error_answer_raises_its_status_and_reason() -> None:
    def stale(request: jpb.SessionRequest, stream: int) -> jpb.SessionResponse:
        error = jpb.SessionError(code=9, message="stale fence 1", reason="STALE_FENCE")
        return jpb.SessionResponse(id=request.id, error=error)

    server, session = await serve(ScriptedJournal(stale))
    try:
        with pytest.raises(JournalCallError) as caught:
            await session.call(record("a"), 10)
        assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert (caught.value.reason, caught.value.message) == ("STALE_FENCE", "stale fence 1")
    finally:
        await session.close()
        await server.stop(None)


async def test_a_call_cut_off_by_a_broken_stream_is_sent_again_on_a_new_one() -> None:
    def first_stream_breaks(request: jpb.SessionRequest, stream: int) -> jpb.SessionResponse | None:
        if stream == 1:
            return None
        return jpb.SessionResponse(id=request.id, record_step=jpb.RecordStepResponse(event_id=5))

    journal = ScriptedJournal(first_stream_breaks)
    server, session = await serve(journal)
    try:
        answer = await session.call(record("a"), 10)
        assert answer.event_id == 5
        assert [stream for stream, _ in journal.received] == [1, 2]
        assert {r.record_step.step_id for _, r in journal.received} == {"a"}
    finally:
        await session.close()
        await server.stop(None)


async def test_a_journal_that_stays_away_fails_the_call_as_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_session, "FIRST_BACKOFF_SECONDS", 0.01)
    journal = ScriptedJournal(lambda request, stream: None)
    server, session = await serve(journal)
    try:
        with pytest.raises(JournalCallError) as caught:
            await session.call(record("a"), 10)
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
        assert journal.streams == _session.ATTEMPTS
    finally:
        await session.close()
        await server.stop(None)
