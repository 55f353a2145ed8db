"""A step's output sent ahead of its answer: the code goes on at once, and the lease's next
call answers for it (its refusal raised there, before the next step's body runs)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker import LeaseLostError, WorkflowCancelledError
from perdure.worker._context import HandedBack, WorkflowContext
from tests.unit.worker.fake_journal import FakeJournal, make_context


class HeldOutput(FakeJournal):
    """Answers the output of step `held` only once `release` is set, then with `error` if
    given (history's refusal of it)."""

    def __init__(self, held: str, error: BaseException | None = None) -> None:
        super().__init__()
        self.held = held
        self.refusal = error
        self.release = asyncio.Event()
        self.holding = asyncio.Event()  # the held output arrived

    async def _call(self, request: Any) -> Any:
        output = isinstance(request, jpb.RecordStepRequest) and request.HasField("output")
        if output and request.step_id == self.held:
            self.holding.set()
            await self.release.wait()
            if self.refusal is not None:
                raise self.refusal
        return await super()._call(request)


async def run_on(turns: int = 20) -> None:
    """Let every task that can go on do so (no clock involved)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def next_body_runs(
    journal: HeldOutput, refused: type[BaseException]
) -> tuple[list[str], WorkflowContext]:
    """Step "a" (its output answered at once), then step "b", which must raise `refused`:
    what b's body did (nothing, if the output's answer stopped it), and the context."""
    journal.release.set()
    ctx = make_context(journal, [])
    assert await ctx.step("a", lambda: 1) == 1
    ran: list[str] = []
    with pytest.raises(refused):
        await ctx.step("b", lambda: ran.append("b"))
    return ran, ctx


async def test_the_code_goes_on_before_the_output_is_answered() -> None:
    journal = HeldOutput("a")
    ctx = make_context(journal, [])
    async with asyncio.timeout(10):  # sent and waited for, it would never return
        assert await ctx.step("a", lambda: 1) == 1
    ran: list[str] = []
    b = asyncio.create_task(ctx.step("b", lambda: ran.append("b")))
    await run_on()
    # b's start is sent beside a's output; its body waits for both answers.
    assert [r.step_id for r in journal.starts] == ["a", "b"] and ran == [] and not b.done()
    journal.release.set()
    await b
    assert ran == ["b"]


async def test_a_refused_output_stops_the_run_before_the_next_body() -> None:
    journal = HeldOutput("a", LeaseLostError("stale fence"))
    ran, _ = await next_body_runs(journal, LeaseLostError)
    assert ran == []


async def test_a_call_other_than_a_step_waits_for_the_output_first() -> None:
    journal = HeldOutput("a")
    ctx = make_context(journal, [])
    await ctx.step("a", lambda: 1)
    state = asyncio.create_task(ctx.set_state("k", 1))
    await journal.holding.wait()
    await run_on()
    assert not any(isinstance(r, jpb.SetStateRequest) for r in journal.recorded)
    journal.release.set()
    await state
    assert isinstance(journal.recorded[-1], jpb.SetStateRequest)


async def test_a_draining_worker_hands_the_run_back_only_once_the_output_is_answered() -> None:
    stopping = asyncio.Event()
    journal = HeldOutput("a")
    ctx = make_context(journal, [], stopping=stopping)
    await ctx.step("a", lambda: 1)
    stopping.set()
    b = asyncio.create_task(ctx.step("b", lambda: 2))
    await journal.holding.wait()
    await run_on()
    assert not b.done()  # no lease goes back while an output is on its way
    journal.release.set()
    with pytest.raises(HandedBack):
        await b
    assert [r.step_id for r in journal.starts] == ["a"]


async def test_an_output_history_could_refuse_is_not_sent_ahead() -> None:
    journal = HeldOutput("a")
    ctx = make_context(journal, [])
    deep: list[Any] = []
    for _ in range(40):
        deep = [deep]
    step = asyncio.create_task(ctx.step("a", lambda: deep))
    await journal.holding.wait()
    await run_on()
    assert not step.done()  # its answer is awaited: a refusal would fail the step at once
    journal.release.set()
    await step


class CancelRequested(HeldOutput):
    """A run with a cancel request: a start sent beside an output, unless_cancel_requested,
    is kept out of the journal, as history does."""

    def RecordStep(self, request: jpb.RecordStepRequest) -> jpb.RecordStepResponse:
        if request.unless_cancel_requested:
            return jpb.RecordStepResponse(event_id=0, cancel_requested=True)
        return jpb.RecordStepResponse(event_id=len(self.recorded) + len(self.starts) + 1)


async def test_a_cancel_request_keeps_the_next_body_from_running() -> None:
    journal = CancelRequested("a")
    ran, ctx = await next_body_runs(journal, WorkflowCancelledError)
    assert ran == []
    [a_start, b_start] = journal.starts
    assert not a_start.unless_cancel_requested and b_start.unless_cancel_requested
    delivered = journal.recorded[-1]
    assert isinstance(delivered, jpb.RecordCancellationRequest)
    assert (delivered.step_id, delivered.position) == ("b", 1)
    # Delivered once: the code's later steps run, their starts journaled as any.
    assert await ctx.step("undo", lambda: "undone") == "undone"
    assert not journal.starts[-1].unless_cancel_requested
