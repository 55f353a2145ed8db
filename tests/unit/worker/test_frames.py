"""current_step().emit(): chunks numbered per attempt and stream, batched while one batch is in
flight, sent again after history was unreachable, stored before the attempt's outcome is
recorded, and refused outside a running attempt."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker import (
    RetryPolicy,
    StepFailedError,
    StreamBufferFullError,
    _frames,
    current_step,
)
from perdure.worker._context import Suspended
from perdure.worker._errors import JournalRejectedError, JournalUnavailableError, LeaseLostError
from perdure.worker._frames import Frames
from tests.unit.worker.fake_journal import FakeJournal, make_context


def chunks(request: jpb.EmitFramesRequest) -> list[Any]:
    return [json.loads(chunk.data) for chunk in request.chunks]


def emitted(journal: FakeJournal, step_id: str, stream: str = "output") -> list[Any]:
    """The chunks a step sent on `stream`, checking that each batch goes on where the last
    ended."""
    sent: list[Any] = []
    for request in journal.recorded:
        if (
            isinstance(request, jpb.EmitFramesRequest)
            and request.stream == stream
            and request.step_id == step_id
        ):
            assert request.first_index == len(sent)
            sent.extend(chunks(request))
    return sent


class Gated:
    """A record function whose answers the test gives one at a time."""

    def __init__(self) -> None:
        self.requests: list[jpb.EmitFramesRequest] = []
        self.answers: asyncio.Queue[BaseException | None] = asyncio.Queue()
        self.sent = asyncio.Event()

    async def __call__(self, request: jpb.EmitFramesRequest) -> jpb.EmitFramesResponse:
        copy = jpb.EmitFramesRequest()
        copy.CopyFrom(request)
        self.requests.append(copy)
        self.sent.set()
        error = await self.answers.get()
        if error is not None:
            raise error
        return jpb.EmitFramesResponse()


async def test_a_steps_chunks_are_stored_in_order_before_its_outcome_sync_or_async(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_frames, "MAX_BUFFERED_CHUNKS", 100)
    journal = FakeJournal()
    ctx = make_context(journal, [])

    async def write() -> str:
        for word in ["a", "b", "c"]:
            current_step().emit(word)
            await asyncio.sleep(0)
        current_step().emit({"tokens": 3}, stream="usage")
        return "abc"

    def write_in_thread() -> int:  # past the buffer's bound: it waits for room, not fails
        for n in range(1000):
            current_step().emit(n)
        return 1000

    assert await ctx.step("write", write) == "abc"
    assert await ctx.step("count", write_in_thread) == 1000
    assert emitted(journal, "write") == ["a", "b", "c"]
    assert emitted(journal, "count") == list(range(1000))
    assert emitted(journal, "write", "usage") == [{"tokens": 3}]
    kinds = [
        (type(r).__name__, r.step_id, r.attempt)
        for r in journal.recorded
        if isinstance(r, jpb.EmitFramesRequest | jpb.RecordStepRequest)
    ]
    # Every frame of a step is sent before the step's record.
    assert kinds.index(("RecordStepRequest", "write", 1)) > max(
        i for i, kind in enumerate(kinds) if kind == ("EmitFramesRequest", "write", 1)
    )
    assert kinds[-1] == ("RecordStepRequest", "count", 1)
    assert len([k for k in kinds if k[1] == "count"]) < 1000  # batched, not one call a chunk


async def test_a_failed_attempts_frames_are_stored_before_its_failure() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    async def flaky() -> None:
        current_step().emit("partial")
        raise OSError("the model went away")

    with pytest.raises(Suspended):  # waiting for the retry
        await ctx.step("answer", flaky)
    emit, record = journal.recorded
    assert isinstance(emit, jpb.EmitFramesRequest) and chunks(emit) == ["partial"]
    assert (emit.step_id, emit.attempt, emit.step_task) == ("answer", 1, False)
    assert isinstance(record, jpb.RecordStepRequest) and record.failure.type == "OSError"


async def test_emit_is_refused_outside_its_running_attempt_and_checks_its_chunk() -> None:
    with pytest.raises(RuntimeError, match="only available inside a running step"):
        current_step().emit("x")
    journal = FakeJournal()
    ctx = make_context(journal, [])
    kept = []

    async def bad() -> None:
        kept.append(current_step())
        current_step().emit({1, 2})  # not JSON

    with pytest.raises(StepFailedError, match="not encodable"):
        await ctx.step("bad", bad, retry=RetryPolicy(maximum_attempts=1))
    with pytest.raises(RuntimeError, match="only available inside its running attempt"):
        kept[0].emit("late")


async def test_chunks_emitted_while_a_batch_is_in_flight_go_together_in_the_next() -> None:
    record = Gated()
    frames = Frames(record, "write", 2, step_task=True)
    frames.emit("a")
    await asyncio.wait_for(record.sent.wait(), 5)
    assert [chunks(r) for r in record.requests] == [["a"]]  # the first leaves at once
    for word in ["b", "c", "d"]:
        frames.emit(word)
    record.answers.put_nowait(None)
    record.answers.put_nowait(None)
    await frames.flush()
    assert [(r.first_index, chunks(r)) for r in record.requests] == [
        (0, ["a"]),
        (1, ["b", "c", "d"]),
    ]
    assert all(r.step_task and r.attempt == 2 for r in record.requests)
    with pytest.raises(RuntimeError, match="is over"):
        frames.emit("late")


async def test_a_batch_is_sent_again_after_history_was_unreachable() -> None:
    record = Gated()
    frames = Frames(record, "write", 1, step_task=False)
    frames.emit("x")
    frames.emit("y")
    record.answers.put_nowait(JournalUnavailableError("history is down"))
    record.answers.put_nowait(None)
    await frames.flush()
    assert [(r.first_index, chunks(r)) for r in record.requests] == [(0, ["x", "y"])] * 2


async def test_a_fenced_out_attempt_stops_sending_and_a_refused_batch_fails_flush() -> None:
    record = Gated()
    frames = Frames(record, "write", 1, step_task=False)
    frames.emit("x")
    record.answers.put_nowait(LeaseLostError("STALE_FENCE"))
    await asyncio.sleep(0.01)
    frames.emit("y")  # dropped: the attempt's own record will be refused
    await frames.flush()
    assert len(record.requests) == 1

    refused = Gated()
    invalid = Frames(refused, "write", 1, step_task=False)
    invalid.emit("x")
    refused.answers.put_nowait(JournalRejectedError("INVALID_ARGUMENT: no"))
    with pytest.raises(JournalRejectedError):
        await invalid.flush()


async def test_chunks_are_checked_and_an_async_body_past_the_bound_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_frames, "MAX_BUFFERED_CHUNKS", 1000)
    frames = Frames(Gated(), "write", 1, step_task=False)
    with pytest.raises(TypeError):
        frames.emit(float("nan"))
    with pytest.raises(TypeError, match="not bytes"):
        frames.emit(b"raw")
    for stream in ["", "a\nb", "s" * 201]:
        with pytest.raises(ValueError, match="stream name"):
            frames.emit("x", stream)
    for n in range(_frames.MAX_BUFFERED_CHUNKS):
        frames.emit(n)
    with pytest.raises(StreamBufferFullError, match="not yet stored"):
        frames.emit("one too many")
