"""The worker's journal session over real gRPC, against a scripted JournalService server:
answers matched by id, calls ready together in one message, errors as statuses, calls sent
again when a stream breaks, streams moved after their max age."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.worker import _session
from perdure.worker._payload import to_payload
from perdure.worker._session import JournalCallError, JournalSession

Answer = Callable[[jpb.JournalCall, int], jpb.JournalAnswer | None]


class ScriptedJournal(jgrpc.JournalServiceServicer):
    """Answers each call with `answer(call, stream number)`, the answers of one message
    together and in reverse order; None breaks the stream without answering."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.streams = 0
        self.received: list[tuple[int, jpb.JournalCall]] = []
        self.messages = 0
        self.closed_by_worker: list[int] = []  # streams the worker half-closed
        self.half_closed = asyncio.Event()

    async def Session(
        self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[jpb.SessionResponse]:
        self.streams += 1
        stream = self.streams
        async for request in request_iterator:
            self.messages += 1
            self.received.extend((stream, call) for call in request.calls)
            answers = [self.answer(call, stream) for call in reversed(request.calls)]
            if any(answer is None for answer in answers):
                await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
            yield jpb.SessionResponse(answers=[a for a in answers if a is not None])
        self.closed_by_worker.append(stream)
        self.half_closed.set()


@contextlib.asynccontextmanager
async def serving(
    journal: ScriptedJournal, max_age: float = _session.STREAM_MAX_AGE_SECONDS
) -> AsyncIterator[JournalSession]:
    """A session to `journal`, served over real gRPC while the context lasts."""
    server = grpc.aio.server()
    jgrpc.add_JournalServiceServicer_to_server(journal, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    session = JournalSession(jgrpc.JournalServiceStub(channel), max_age)
    try:
        yield session
    finally:
        await session.close()
        await server.stop(None)


def record(step_id: str) -> jpb.RecordStepRequest:
    return jpb.RecordStepRequest(workflow_id="wf", fence=1, step_id=step_id, step_name="s")


def event_id_of(call: jpb.JournalCall, stream: int) -> jpb.JournalAnswer:
    event_id = int(call.record_step.step_id.removeprefix("step"))
    return jpb.JournalAnswer(id=call.id, record_step=jpb.RecordStepResponse(event_id=event_id))


async def test_answers_reach_their_callers_whatever_their_order() -> None:
    journal = ScriptedJournal(event_id_of)
    async with serving(journal) as session:
        answers = await asyncio.gather(*(session.call(record(f"step{n}"), 10) for n in (1, 2, 3)))
        assert [a.event_id for a in answers] == [1, 2, 3]
        assert journal.streams == 1  # one stream for every call
        assert journal.messages == 1  # made together, sent together


async def test_an_error_answer_raises_its_status_and_reason() -> None:
    def stale(call: jpb.JournalCall, stream: int) -> jpb.JournalAnswer:
        error = jpb.SessionError(code=9, message="stale fence 1", reason="STALE_FENCE")
        return jpb.JournalAnswer(id=call.id, error=error)

    journal = ScriptedJournal(stale)
    async with serving(journal) as session:
        with pytest.raises(JournalCallError) as caught:
            await session.call(record("a"), 10)
        assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert (caught.value.reason, caught.value.message) == ("STALE_FENCE", "stale fence 1")
        assert len(journal.received) == 1  # a refusal is the call's answer: sent once


async def test_a_call_cut_off_by_a_broken_stream_is_sent_again_on_a_new_one() -> None:
    def first_stream_breaks(call: jpb.JournalCall, stream: int) -> jpb.JournalAnswer | None:
        if stream == 1:
            return None
        return jpb.JournalAnswer(id=call.id, record_step=jpb.RecordStepResponse(event_id=5))

    journal = ScriptedJournal(first_stream_breaks)
    async with serving(journal) as session:
        answer = await session.call(record("a"), 10)
        assert answer.event_id == 5
        assert [stream for stream, _ in journal.received] == [1, 2]
        assert {r.record_step.step_id for _, r in journal.received} == {"a"}


async def test_a_journal_that_stays_away_fails_the_call_as_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_session, "FIRST_BACKOFF_SECONDS", 0.01)
    journal = ScriptedJournal(lambda call, stream: None)
    async with serving(journal) as session:
        with pytest.raises(JournalCallError) as caught:
            await session.call(record("a"), 10)
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
        assert journal.streams == _session.ATTEMPTS


def unavailable(call: jpb.JournalCall) -> jpb.JournalAnswer:
    message = "the database failed this call for a passing reason (terminated); call again"
    return jpb.JournalAnswer(id=call.id, error=jpb.SessionError(code=14, message=message))


async def test_a_call_history_answers_unavailable_is_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # History's database lost the call's connection: the call is idempotent, so it goes
    # again (on the same stream) rather than giving the run up to its lease's expiry.
    monkeypatch.setattr(_session, "FIRST_BACKOFF_SECONDS", 0.01)
    sent: list[str] = []

    def twice_unavailable(call: jpb.JournalCall, stream: int) -> jpb.JournalAnswer:
        sent.append(call.record_step.step_id)
        if len(sent) <= 2:
            return unavailable(call)
        return jpb.JournalAnswer(id=call.id, record_step=jpb.RecordStepResponse(event_id=7))

    journal = ScriptedJournal(twice_unavailable)
    async with serving(journal) as session:
        answer = await session.call(record("a"), 10)
        assert answer.event_id == 7 and sent == ["a", "a", "a"] and journal.streams == 1


async def test_a_call_answered_unavailable_every_time_fails_as_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_session, "FIRST_BACKOFF_SECONDS", 0.01)
    journal = ScriptedJournal(lambda call, stream: unavailable(call))
    async with serving(journal) as session:
        with pytest.raises(JournalCallError) as caught:
            await session.call(record("a"), 10)
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
        assert "call again" in caught.value.message
        assert len(journal.received) == _session.ATTEMPTS


async def test_an_old_stream_takes_no_new_calls_and_closes_once_its_calls_are_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]  # the session's own clock, moved by the test
    monkeypatch.setattr(_session, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    journal = ScriptedJournal(event_id_of)
    async with serving(journal, max_age=60) as session:
        first = await session.call(record("step1"), 10)
        clock[0] += 100  # older than its max age, give or take its tenth, now
        second, third = await asyncio.gather(
            session.call(record("step2"), 10), session.call(record("step3"), 10)
        )
        assert (first.event_id, second.event_id, third.event_id) == (1, 2, 3)
        assert [stream for stream, _ in journal.received] == [1, 2, 2]
        await asyncio.wait_for(journal.half_closed.wait(), 10)
        assert journal.closed_by_worker == [1]  # half-closed, not broken
        assert journal.streams == 2


async def test_a_call_too_large_for_a_message_fails_alone_and_the_stream_carries_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A small limit stands in for 64 MiB: two calls that fit it together cannot share a message.
    monkeypatch.setattr(_session, "MAX_ITEM_BYTES", 200)
    journal = ScriptedJournal(event_id_of)
    async with serving(journal) as session:
        huge = record("step9")
        huge.output.CopyFrom(to_payload("x" * 500))
        with pytest.raises(JournalCallError) as refused:
            await session.call(huge, 10)
        assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.reason == "MESSAGE_TOO_LARGE"
        assert journal.received == []  # never written: the stream the others share is whole
        big = [record(f"step{n}") for n in (1, 2)]
        for request in big:
            request.output.CopyFrom(to_payload("y" * 120))
        answers = await asyncio.gather(*(session.call(request, 10) for request in big))
        assert [a.event_id for a in answers] == [1, 2]
        assert (journal.streams, journal.messages) == (1, 2)  # one stream, a message each
