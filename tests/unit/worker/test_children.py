"""ctx.child and ctx.start_child against hand-built journals: the arguments checked before
anything is journaled, the default child id, a replayed start that starts nothing, and a child
call of another kind at a recorded position parking the run."""

from __future__ import annotations

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import ChildWorkflowFailedError, NonDeterminismError
from perdure.worker._children import child_id
from perdure.worker._context import Suspended
from perdure.worker._payload import to_payload
from tests.unit.worker.fake_journal import FakeJournal, make_context


def child_started(position: int, step_id: str, child: str, run: str) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=position + 2,
        event_type=wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED,
        step_id=step_id,
        step_name="kid",
        position=position,
        child_workflow_id=child,
        child_run_id=run,
    )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"parent_close_policy": "kill"}, ValueError),
        ({"id": ""}, ValueError),
        ({"id": " padded"}, ValueError),
        ({"id": "x" * 256}, ValueError),
        ({"id": "@ns/forged"}, ValueError),
    ],
)
async def test_bad_arguments_are_refused_before_anything_is_journaled(
    arguments: dict[str, str], error: type[Exception]
) -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    with pytest.raises(error):
        await ctx.start_child("kid", 1, **arguments)
    with pytest.raises(ValueError):
        await ctx.start_child("$internal")
    assert journal.recorded == []


def test_the_default_child_id_is_the_parent_s_the_position_and_the_run() -> None:
    assert child_id("order-7", 1, 3, None) == "order-7-child-3"
    assert child_id("@acme/order-7", 2, 0, None) == "order-7-child-0-run-2"
    assert child_id("order-7", 1, 3, "chosen") == "chosen"
    with pytest.raises(ValueError, match="pass id="):
        child_id("p" * 250, 1, 0, None)


async def test_a_new_child_call_is_journaled_with_its_defaults() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    handle = await ctx.start_child("kid", {"n": 1}, parent_close_policy="abandon")

    [request] = journal.recorded
    assert isinstance(request, jpb.StartChildRequest)
    assert (request.step_id, request.step_name, request.position) == ("kid", "kid", 0)
    assert (request.child_workflow_id, request.task_queue) == ("wf-1-child-0", "default")
    assert request.parent_close_policy == wf.PARENT_CLOSE_POLICY_ABANDON
    assert request.input == to_payload({"n": 1})
    assert (handle.workflow_id, handle.run_id, handle.step_id) == (
        "wf-1-child-0",
        "run-of-wf-1-child-0",
        "kid",
    )
    with pytest.raises(Suspended) as suspended:
        await handle.result()
    assert (suspended.value.wait.kind, suspended.value.wait.name) == (wf.WAIT_KIND_CHILD, "kid")


async def test_a_replayed_child_call_starts_nothing_and_raises_its_recorded_failure() -> None:
    failed = wf.HistoryEvent(
        event_id=3,
        event_type=wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED,
        step_id="kid",
        name="TERMINATED",
        child_workflow_id="given",
        child_run_id="r1",
        failure=wf.Failure(type="Terminated", message="enough"),
    )
    journal = FakeJournal()
    ctx = make_context(journal, [child_started(0, "kid", "given", "r1"), failed])

    with pytest.raises(ChildWorkflowFailedError) as raised:
        await ctx.child("kid", 1, id="given")

    assert journal.recorded == []
    error = raised.value
    assert (error.error_type, error.status, error.workflow_id, error.run_id, error.step_id) == (
        "Terminated",
        "TERMINATED",
        "given",
        "r1",
        "kid",
    )


async def test_a_child_call_where_the_journal_holds_another_call_parks_the_run() -> None:
    step = wf.HistoryEvent(
        event_id=2, event_type=wf.EVENT_TYPE_STEP_SCHEDULED, step_id="kid", position=0
    )
    ctx = make_context(FakeJournal(), [step])
    with pytest.raises(NonDeterminismError, match="child workflow 'kid'"):
        await ctx.start_child("kid")
