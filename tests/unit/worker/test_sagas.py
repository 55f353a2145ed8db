"""Sagas and standing objectives in the Python SDK, past what the shared replay cases hold:
what compensates and what does not, failures carried, arguments checked, a loop resumed after
continue_as_new."""

from __future__ import annotations

from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import RetryPolicy, StepFailedError, Turn, TurnResult
from perdure.worker._context import ContinuedAsNew, Suspended, WorkflowContext
from perdure.worker._payload import from_payload
from tests.unit.worker.fake_journal import FakeJournal, make_context

NO_RETRY = RetryPolicy(maximum_attempts=1)


class OutOfStockError(Exception):
    pass


def started() -> list[wf.HistoryEvent]:
    return [wf.HistoryEvent(event_id=1, event_type=wf.EVENT_TYPE_WORKFLOW_STARTED)]


def fresh() -> tuple[FakeJournal, WorkflowContext]:
    journal = FakeJournal()
    return journal, make_context(journal, started(), retry=NO_RETRY)


def done_steps(journal: FakeJournal) -> list[str]:
    return [r.step_id for r in journal.steps()]


def fails(message: str) -> Any:
    def body() -> None:
        raise OutOfStockError(message)

    return body


async def test_a_saga_that_ends_normally_compensates_nothing() -> None:
    journal, ctx = fresh()
    async with ctx.saga() as saga:
        await ctx.step("reserve", lambda: "reserved")
        saga.add_compensation("release", lambda: "released")
    assert done_steps(journal) == ["reserve"]


async def test_a_failed_compensation_is_carried_by_the_blocks_error_and_the_rest_run() -> None:
    journal, ctx = fresh()
    with pytest.raises(StepFailedError) as raised:
        async with ctx.saga() as saga:
            saga.add_compensation("release", lambda: "released")
            saga.add_compensation("refund", fails("already settled"))
            await ctx.step("ship", fails("no stock"))
    error = raised.value
    assert error.step_id == "ship" and "no stock" in error.message
    assert done_steps(journal) == ["ship", "refund", "release"]
    (failure,) = error.compensation_failures  # type: ignore[attr-defined]
    assert isinstance(failure, StepFailedError) and failure.step_id == "refund"
    assert any("compensation 'refund' failed too" in note for note in error.__notes__)


async def test_the_workflow_code_own_error_compensates_and_goes_on() -> None:
    journal, ctx = fresh()
    with pytest.raises(OutOfStockError):
        async with ctx.saga() as saga:
            await ctx.step("reserve", lambda: "reserved")
            saga.add_compensation("release", lambda: "released")
            raise OutOfStockError("decided in code")
    assert done_steps(journal) == ["reserve", "release"]


async def test_continuing_as_new_in_a_saga_compensates_nothing() -> None:
    journal, ctx = fresh()
    with pytest.raises(ContinuedAsNew):
        async with ctx.saga() as saga:
            await ctx.step("reserve", lambda: "reserved")
            saga.add_compensation("release", lambda: "released")
            await ctx.continue_as_new({"next": 1})
    assert done_steps(journal) == ["reserve"]


async def test_a_remote_compensation_is_scheduled_when_it_runs() -> None:
    journal, ctx = fresh()
    saga = ctx.saga()
    saga.add_remote_compensation("refund_card", {"order": 7}, task_queue="payments")
    assert journal.recorded == []
    with pytest.raises(Suspended):  # the run waits for the remote step's outcome
        await saga.compensate()
    (scheduled,) = [r for r in journal.recorded if isinstance(r, jpb.ScheduleStepRequest)]
    assert (scheduled.step_id, scheduled.task_queue) == ("refund_card", "payments")
    assert from_payload(scheduled.input) == {"order": 7}


async def test_compensations_are_checked_when_registered() -> None:
    _, ctx = fresh()
    saga = ctx.saga()
    with pytest.raises(ValueError, match="step name"):
        saga.add_compensation("$refund", lambda: None)
    with pytest.raises(TypeError, match="needs a function"):
        saga.add_compensation("refund", "not a function")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step type"):
        saga.add_remote_compensation("")


async def test_a_loop_resumed_from_carry_counts_on_and_keeps_its_steering() -> None:
    journal, ctx = fresh()
    seen: list[Turn] = []

    async def take_turn(turn: Turn) -> TurnResult:
        seen.append(turn)
        return TurnResult(state=(turn.state or 0) + 1, units=5)

    carried = Turn(4, "find trains", 3, ("no night trains",), 15).carry()
    result = await ctx.agent_loop(
        take_turn, objective="ignored when resumed", max_turns=5, resume=carried
    )
    assert [turn.number for turn in seen] == [4, 5]
    assert seen[0].guidance == ("no night trains",) and seen[0].spent == 15
    assert result.as_dict() == {
        "reason": "max_turns",
        "turns": 5,
        "objective": "find trains",
        "state": 5,
        "spent": 25,
        "guidance": ["no night trains"],
    }
    published = [r for r in journal.recorded if isinstance(r, jpb.SetStateRequest)]
    assert from_payload(published[-1].value)["status"] == "max_turns"


async def test_a_turn_continues_as_new_with_its_carry() -> None:
    _, ctx = fresh()

    async def take_turn(turn: Turn) -> TurnResult:
        if turn.number == 2:
            await ctx.continue_as_new({"loop": turn.carry()})
        return TurnResult(state=["a"], units=1)

    with pytest.raises(ContinuedAsNew) as continued:
        await ctx.agent_loop(take_turn, objective="o", max_turns=9)
    assert from_payload(continued.value.input) == {
        "loop": {"objective": "o", "state": ["a"], "turns": 1, "spent": 1, "guidance": []}
    }


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_turns": 0}, ValueError),
        ({"max_turns": 2, "budget": -1}, ValueError),
        ({"max_turns": 2, "is_met": "yes"}, TypeError),
        ({"max_turns": 2, "steering_signal": "$steer"}, ValueError),
        ({"max_turns": 2, "resume": ["not", "a", "carry"]}, TypeError),
    ],
)
async def test_loop_options_are_checked_before_any_call(
    options: dict[str, Any], error: type[Exception]
) -> None:
    journal, ctx = fresh()

    async def take_turn(turn: Turn) -> TurnResult:
        return TurnResult(state=None)

    with pytest.raises(error):
        await ctx.agent_loop(take_turn, objective="o", **options)
    assert journal.recorded == []


@pytest.mark.parametrize(("returned", "error"), [("state", TypeError), (-1, ValueError)])
async def test_what_a_turn_returns_is_checked(returned: Any, error: type[Exception]) -> None:
    _, ctx = fresh()

    async def take_turn(turn: Turn) -> Any:
        return returned if returned == "state" else TurnResult(state=None, units=returned)

    with pytest.raises(error):
        await ctx.agent_loop(take_turn, objective="o", max_turns=3)
