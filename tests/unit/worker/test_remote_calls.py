"""ctx.call and ctx.gather against hand-built journals: journaled in call order, replayed from
their outcomes (which hold no position), suspended while any is pending."""

from __future__ import annotations

from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import NonDeterminismError, RetryPolicy, StepFailedError
from perdure.worker._context import Suspended
from perdure.worker._errors import WorkflowCancelledError
from perdure.worker._payload import to_payload
from tests.unit.worker.fake_journal import FakeJournal, make_context


def scheduled(event_id: int, position: int, step_id: str) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_STEP_SCHEDULED,
        step_id=step_id,
        step_name=step_id.partition("#")[0],
        position=position,
    )


def outcome(event_id: int, step_id: str, output: Any = None, failure: str = "") -> wf.HistoryEvent:
    """A remote step's outcome: no position (the proto's 0)."""
    event = wf.HistoryEvent(event_id=event_id, step_id=step_id, step_name=step_id, fence=3)
    if failure:
        event.event_type = wf.EVENT_TYPE_STEP_FAILED
        event.failure.CopyFrom(wf.Failure(type="Boom", message=failure))
    else:
        event.event_type = wf.EVENT_TYPE_STEP_COMPLETED
        event.payload.CopyFrom(to_payload(output))
    return event


async def test_a_first_run_schedules_each_call_in_order_then_suspends() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    retry = RetryPolicy(initial_interval=0.5, maximum_attempts=3)

    with pytest.raises(Suspended) as suspended:
        await ctx.gather(
            ctx.call("square", {"n": 1}, task_queue="tools", retry=retry, timeout=2.5),
            ctx.call("square", {"n": 2}),
        )

    first, second = journal.recorded
    assert isinstance(first, jpb.ScheduleStepRequest)
    assert (first.step_id, first.step_name, first.position, first.task_queue) == (
        "square",
        "square",
        0,
        "tools",
    )
    assert first.retry.maximum_attempts == 3 and first.timeout.ToMilliseconds() == 2500
    # Defaults: the workflow's own task queue and retry policy.
    assert (second.step_id, second.position, second.task_queue) == ("square#2", 1, "default")
    assert second.retry.maximum_attempts == RetryPolicy().maximum_attempts
    assert suspended.value.wait.kind == wf.WAIT_KIND_STEP
    assert suspended.value.wait.name == "square"


async def test_replay_returns_the_results_in_call_order_whatever_order_they_came_in() -> None:
    journal = FakeJournal()
    events = [
        scheduled(2, 0, "square"),
        scheduled(3, 1, "square#2"),
        outcome(4, "square#2", 4),
        outcome(5, "square", 1),
    ]
    ctx = make_context(journal, events)

    results = await ctx.gather(ctx.call("square", {"n": 1}), ctx.call("square", {"n": 2}))
    then = await ctx.step("after", lambda: "local")

    assert results == [1, 4] and then == "local"
    assert [type(r) for r in journal.recorded] == [jpb.RecordStepRequest]
    assert journal.recorded[0].position == 2  # the outcomes took no position


async def test_one_pending_call_suspends_the_run_on_it() -> None:
    events = [scheduled(2, 0, "a"), scheduled(3, 1, "b"), outcome(4, "a", "done")]
    ctx = make_context(FakeJournal(), events)

    with pytest.raises(Suspended) as suspended:
        await ctx.gather(ctx.call("a"), ctx.call("b"))

    assert suspended.value.wait.name == "b"


async def test_a_failed_call_raises_once_all_have_their_outcome() -> None:
    events = [
        scheduled(2, 0, "a"),
        scheduled(3, 1, "b"),
        outcome(4, "b", failure="second"),
        outcome(5, "a", failure="first"),
    ]
    ctx = make_context(FakeJournal(), events)

    with pytest.raises(StepFailedError) as failed:
        await ctx.gather(ctx.call("a"), ctx.call("b"))

    assert failed.value.step_id == "a" and failed.value.message == "first"


async def test_an_awaited_call_returns_its_result() -> None:
    ctx = make_context(FakeJournal(), [scheduled(2, 0, "notify"), outcome(3, "notify", "sent")])

    assert await ctx.call("notify", {"to": "ops"}) == "sent"


async def test_a_local_step_where_a_remote_call_was_journaled_is_non_deterministic() -> None:
    ctx = make_context(FakeJournal(), [scheduled(2, 0, "notify"), outcome(3, "notify", "sent")])

    with pytest.raises(NonDeterminismError):
        await ctx.step("notify", lambda: "sent")


async def test_a_cancel_request_ends_the_wait_for_remote_steps() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [scheduled(2, 0, "slow")], cancel_requested=True)

    with pytest.raises(WorkflowCancelledError):
        await ctx.call("slow")

    [delivered] = journal.recorded
    assert isinstance(delivered, jpb.RecordCancellationRequest)
    assert (delivered.step_id, delivered.position) == ("slow:cancelled", 1)


async def test_a_delivered_cancellation_is_raised_again_on_replay_even_after_the_outcome() -> None:
    delivered = wf.HistoryEvent(
        event_id=4,
        event_type=wf.EVENT_TYPE_CANCELLATION_DELIVERED,
        step_id="slow:cancelled",
        position=1,
    )
    events = [scheduled(2, 0, "slow"), delivered, outcome(5, "slow", "late")]
    ctx = make_context(FakeJournal(), events, cancel_requested=True)

    with pytest.raises(WorkflowCancelledError):
        await ctx.call("slow")


async def test_a_call_needs_a_step_type_and_a_positive_timeout() -> None:
    ctx = make_context(FakeJournal(), [])

    with pytest.raises(ValueError, match="step type"):
        ctx.call("$internal")
    with pytest.raises(ValueError, match="timeout"):
        ctx.call("notify", timeout=0)
