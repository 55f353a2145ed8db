"""The replay gate's check of one run (perdure.worker._replay_check) on journals written here:
where it stops, what it reports, and that it never runs a step."""

from __future__ import annotations

from typing import Any

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import WorkflowContext, workflow
from perdure.worker._history import History
from perdure.worker._payload import to_payload
from perdure.worker._replay_check import check_run, workflows_in
from perdure.worker.testing import assert_replays, replay

ran: list[str] = []  # the steps whose bodies ran: none may


def body(name: str, value: Any) -> Any:
    ran.append(name)
    return value


@workflow(name="order")
async def order(ctx: WorkflowContext, n: int) -> int:
    reserved = await ctx.step("reserve", body, "reserve", n)
    charged = await ctx.step("charge", body, "charge", reserved + 1)
    await ctx.wait_for_signal("ship")
    await ctx.step("ship", body, "ship", charged)
    return int(charged)


@workflow(name="order")
async def order_reordered(ctx: WorkflowContext, n: int) -> int:
    charged = await ctx.step("charge", body, "charge", n + 1)
    await ctx.step("reserve", body, "reserve", n)
    await ctx.wait_for_signal("ship")
    return int(charged)


@workflow(name="order")
async def order_extended(ctx: WorkflowContext, n: int) -> int:
    charged = await order(ctx, n)
    await ctx.step("receipt", body, "receipt", charged)
    return charged


@workflow(name="order")
async def order_shortened(ctx: WorkflowContext, n: int) -> int:
    return int(await ctx.step("reserve", body, "reserve", n))


def started(event_id: int, value: Any) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id, event_type=wf.EVENT_TYPE_WORKFLOW_STARTED, payload=to_payload(value)
    )


def step(event_id: int, position: int, step_id: str, value: Any) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_STEP_COMPLETED,
        step_id=step_id,
        step_name=step_id,
        position=position,
        payload=to_payload(value),
    )


def waiting_for_ship() -> History:
    """A run of `order` that completed two steps and waits for the signal "ship"."""
    info = wf.WorkflowInfo(
        workflow_id="o-1", run_id="r-1", workflow_type="order", status=wf.WORKFLOW_STATUS_WAITING
    )
    suspended = wf.HistoryEvent(event_id=4, event_type=wf.EVENT_TYPE_WORKFLOW_SUSPENDED)
    return History(
        info, [started(1, 5), step(2, 0, "reserve", 5), step(3, 1, "charge", 6), suspended]
    )


@pytest.fixture(autouse=True)
def no_step_runs() -> Any:
    ran.clear()
    yield
    assert ran == [], "the check ran a step's body"


async def test_the_same_code_replays_up_to_its_wait() -> None:
    verdict = await check_run(workflows_in(order), waiting_for_ship())
    assert verdict.outcome == "passed"
    assert "wait" in verdict.detail and "ship" in verdict.detail


async def test_a_signal_waiting_to_be_consumed_is_the_frontier() -> None:
    history = waiting_for_ship()
    history.events.append(
        wf.HistoryEvent(
            event_id=5, event_type=wf.EVENT_TYPE_SIGNAL_RECEIVED, name="ship", payload=to_payload(1)
        )
    )
    verdict = await check_run(workflows_in(order), history)
    assert verdict.outcome == "passed"
    assert "frontier at #2" in verdict.detail and "$signal:ship" in verdict.detail


async def test_reordered_steps_are_reported_with_position_and_both_calls() -> None:
    verdict = await check_run(workflows_in(order_reordered), waiting_for_ship())
    assert verdict.outcome == "non_deterministic"
    assert verdict.position == 0
    assert verdict.expected == "step_completed 'reserve'"
    assert verdict.found == "step 'charge'"
    with pytest.raises(AssertionError, match=r"non-deterministic at call #0"):
        replay(order_reordered, waiting_for_ship())


async def test_steps_appended_after_the_frontier_pass() -> None:
    history = waiting_for_ship()
    history.events.extend(
        [
            wf.HistoryEvent(
                event_id=5,
                event_type=wf.EVENT_TYPE_SIGNAL_CONSUMED,
                step_id="$signal:ship",
                position=2,
                consumed_event_ids=[],
                payload=to_payload(None),
            ),
            step(6, 3, "ship", 6),
        ]
    )
    history.workflow.status = wf.WORKFLOW_STATUS_RUNNING
    verdict = await check_run(workflows_in(order_extended), history)
    assert verdict.outcome == "passed"
    assert "frontier at #4" in verdict.detail and "'receipt'" in verdict.detail


async def test_code_ending_before_recorded_calls_is_reported() -> None:
    verdict = await check_run(workflows_in(order_shortened), waiting_for_ship())
    assert verdict.outcome == "non_deterministic"
    assert (verdict.position, verdict.expected) == (1, "step_completed 'charge'")
    assert verdict.found == "the end of the workflow"


async def test_a_type_the_code_does_not_have_is_skipped() -> None:
    history = waiting_for_ship()
    history.workflow.workflow_type = "invoice"
    verdict = await check_run(workflows_in(order), history)
    assert verdict.outcome == "skipped"


def test_saved_histories_round_trip_and_replay_from_a_directory(tmp_path: Any) -> None:
    waiting_for_ship().write(tmp_path / "o-1.json")
    assert History.read(tmp_path / "o-1.json") == waiting_for_ship()
    [verdict] = assert_replays([order], tmp_path)
    assert verdict.outcome == "passed"
    with pytest.raises(AssertionError, match="1 of 1 saved runs do not replay"):
        assert_replays(order_reordered, tmp_path)
    (tmp_path / "broken.json").write_text('{"events": 3}')
    with pytest.raises(ValueError, match=r"broken\.json: a saved history is a JSON object"):
        assert_replays(order, tmp_path)


async def test_a_payload_held_by_reference_is_an_error_not_a_failure_of_the_code() -> None:
    history = waiting_for_ship()
    history.events[1].ClearField("payload")
    history.events[1].payload_ref.sha256 = b"\0" * 32
    verdict = await check_run(workflows_in(order), history)
    assert verdict.outcome == "error"
    assert "by reference" in verdict.detail


@workflow(name="napper")
async def napper(ctx: WorkflowContext) -> str:
    await ctx.sleep(3600)
    return str(await ctx.step("wake", body, "wake", "up"))


def napping(cancel_requested: bool = False) -> History:
    """A run of `napper` whose hour-long timer started just now."""
    info = wf.WorkflowInfo(
        workflow_id="n-1", workflow_type="napper", cancel_requested=cancel_requested
    )
    timer = wf.HistoryEvent(
        event_id=2, event_type=wf.EVENT_TYPE_TIMER_STARTED, step_id="$sleep", position=0
    )
    timer.due_time.GetCurrentTime()
    timer.due_time.seconds += 3600
    return History(info, [started(1, None), timer])


async def test_a_timer_not_due_is_where_the_run_waits_and_a_cancel_request_its_frontier() -> None:
    waiting = await check_run(workflows_in(napper), napping())
    assert waiting.outcome == "passed"
    assert "wait (timer '$sleep')" in waiting.detail
    cancelled = await check_run(workflows_in(napper), napping(cancel_requested=True))
    assert cancelled.outcome == "passed"
    assert "frontier at #1: cancellation '$sleep:cancelled'" in cancelled.detail
