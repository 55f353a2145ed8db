"""Child workflows, driven on the Journal and the relatives' notices directly: a child started
once however often its call is sent, its outcome journaled once in its parent, a parent's close
and cancel request reaching its open children, and a child and its parent closing at once."""

from __future__ import annotations

import asyncio

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.errors import ApiError
from perdure.common.payload import json_payload
from perdure.common.reasons import Reason
from perdure.history.model import (
    Call,
    ChildStart,
    EventType,
    Lease,
    Outcome,
    ParentClosePolicy,
    StepRecord,
)
from perdure.history.relatives import Relatives
from tests.integration.journal_db import Db, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures

CHILD_EVENTS = (
    wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED,
    wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED,
    wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED,
)


def child_call(lease: Lease, position: int = 0, step_id: str = "kid") -> Call:
    return Call(lease, step_id, "kid", position)


def child(
    workflow_id: str, policy: ParentClosePolicy = ParentClosePolicy.TERMINATE, value: str = "1"
) -> ChildStart:
    return ChildStart(workflow_id, "kid", "q", json_payload(value), policy)


async def child_events(db: Db, workflow_id: str) -> list[wf.HistoryEvent]:
    events, _ = await db.journal.history_page(workflow_id, 0, "")
    return [e for e in events if e.event_type in CHILD_EVENTS]


async def carry_out(db: Db) -> int:
    """Carry out every notice there is; how many."""
    relatives, done = Relatives(db.pool, db.wakes), 0
    while await relatives.carry_out_one():
        done += 1
    return done


async def outbox_rows(db: Db, workflow_id: str) -> int:
    """The run's scheduling requests not relayed (no relay runs here)."""
    async with db.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM history.outbox WHERE workflow_id = %s", [workflow_id]
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def loaded(db: Db, workflow_id: str, fence: int = 1) -> Lease:
    lease = Lease(workflow_id, fence, "")
    await db.journal.load(lease)
    return lease


async def test_a_child_call_sent_again_starts_one_child(db: Db) -> None:
    parent = await started(db.journal)
    kid = run_id()
    first = await db.journal.start_child(child_call(parent), child(kid))
    again = await db.journal.start_child(child_call(parent), child(kid))
    racing = await asyncio.gather(
        *(db.journal.start_child(child_call(parent), child(kid)) for _ in range(3))
    )

    appended, run, failure = first
    assert run and failure is None
    assert {(a.event_id, r) for a, r, _ in (again, *racing)} == {(appended.event_id, run)}
    info = (await db.journal.describe(kid)).info
    assert (info.run_id, info.run_number) == (run, 1)
    assert (info.parent_workflow_id, info.parent_close_policy) == (
        parent.workflow_id,
        wf.PARENT_CLOSE_POLICY_TERMINATE,
    )
    [event] = await child_events(db, parent.workflow_id)
    assert (event.child_workflow_id, event.child_run_id, event.name) == (kid, run, "kid")
    # Something else at that call is a conflict, and starts nothing.
    conflict = await refusal(db.journal.start_child(child_call(parent), child(kid, value="2")))
    assert conflict.reason == Reason.STEP_CONFLICT


async def test_a_child_id_held_by_an_open_run_journals_the_failure_at_once(db: Db) -> None:
    held = await started(db.journal)
    parent = await started(db.journal)
    _, run, failure = await db.journal.start_child(child_call(parent), child(held.workflow_id))

    assert run == "" and failure is not None and failure["type"] == "WorkflowAlreadyStarted"
    started_event, failed = await child_events(db, parent.workflow_id)
    assert (started_event.child_run_id, failed.event_type) == (
        "",
        wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED,
    )
    assert failed.failure.type == "WorkflowAlreadyStarted" and failed.position == 0
    # Sent again: the same answer.
    _, run_again, failure_again = await db.journal.start_child(
        child_call(parent), child(held.workflow_id)
    )
    assert (run_again, failure_again) == ("", failure)
    assert (await db.journal.describe(held.workflow_id)).info.parent_workflow_id == ""


async def test_a_closed_child_s_outcome_reaches_its_parent_once(db: Db) -> None:
    parent = await started(db.journal)
    kid = run_id()
    _, run, _ = await db.journal.start_child(child_call(parent), child(kid))
    kid_lease = await loaded(db, kid)
    # The child continues as new: no outcome yet; the next run is still the parent's child.
    await db.journal.finish(kid_lease, Outcome.CONTINUE_AS_NEW, json_payload('"again"'))
    assert await carry_out(db) == 0
    next_run = (await db.journal.describe(kid)).info
    assert next_run.parent_workflow_id == parent.workflow_id and next_run.run_id != run
    await db.journal.finish(await loaded(db, kid, 3), Outcome.RESULT, json_payload('"sum"'))

    wakes = await outbox_rows(db, parent.workflow_id)
    assert await carry_out(db) == 1
    assert await carry_out(db) == 0
    assert await outbox_rows(db, parent.workflow_id) == wakes + 1  # the parent's wake-up
    _, completed = await child_events(db, parent.workflow_id)
    assert completed.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED
    assert (completed.step_id, completed.position, completed.payload.data) == ("kid", 0, b'"sum"')
    assert (completed.child_workflow_id, completed.child_run_id) == (kid, next_run.run_id)


async def test_a_parent_s_close_applies_each_child_s_policy(db: Db) -> None:
    parent = await started(db.journal)
    kids = {policy: run_id() for policy in ParentClosePolicy}
    for position, (policy, kid) in enumerate(kids.items()):
        call = child_call(parent, position, f"kid#{position + 1}" if position else "kid")
        await db.journal.start_child(call, child(kid, policy))
    await db.journal.finish(parent, Outcome.RESULT, json_payload('"done"'))

    await carry_out(db)

    described = {p: (await db.journal.describe(k)).info for p, k in kids.items()}
    assert described[ParentClosePolicy.TERMINATE].status == wf.WORKFLOW_STATUS_TERMINATED
    cancel = described[ParentClosePolicy.REQUEST_CANCEL]
    assert cancel.status == wf.WORKFLOW_STATUS_RUNNING and cancel.cancel_requested
    abandoned = described[ParentClosePolicy.ABANDON]
    assert abandoned.status == wf.WORKFLOW_STATUS_RUNNING and not abandoned.cancel_requested
    # The terminated child's outcome finds its parent closed: nothing is journaled there.
    assert [e.event_type for e in await child_events(db, parent.workflow_id)] == [
        wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED
    ] * 3
    children = (await db.journal.describe(parent.workflow_id)).children
    assert [c.status for c in children] == [
        wf.WORKFLOW_STATUS_TERMINATED,
        wf.WORKFLOW_STATUS_RUNNING,
        wf.WORKFLOW_STATUS_RUNNING,
    ]


async def test_a_parent_s_cancel_request_goes_down_to_its_grandchildren(db: Db) -> None:
    parent = await started(db.journal)
    kid, grandkid, abandoned = run_id(), run_id(), run_id()
    await db.journal.start_child(child_call(parent), child(kid))
    await db.journal.start_child(
        child_call(parent, 1, "kid#2"), child(abandoned, ParentClosePolicy.ABANDON)
    )
    await db.journal.start_child(child_call(await loaded(db, kid)), child(grandkid))

    await db.journal.cancel(parent.workflow_id, "stop", "")
    await carry_out(db)

    for workflow_id, asked in ((kid, True), (grandkid, True), (abandoned, False)):
        info = (await db.journal.describe(workflow_id)).info
        assert info.cancel_requested is asked, workflow_id


async def test_a_child_and_its_parent_closing_at_once_do_not_deadlock(db: Db) -> None:
    pairs = []
    for _ in range(10):
        parent = await started(db.journal)
        kid = run_id()
        await db.journal.start_child(child_call(parent), child(kid))
        pairs.append((parent, await loaded(db, kid)))
    relatives = [Relatives(db.pool, db.wakes) for _ in range(2)]

    async def drain(relative: Relatives) -> None:
        for _ in range(50):
            await relative.carry_out_one()
            await asyncio.sleep(0)

    closes = [
        db.journal.finish(lease, Outcome.RESULT, json_payload("1"))
        for pair in pairs
        for lease in pair
    ]
    results = await asyncio.wait_for(
        asyncio.gather(*closes, *(drain(r) for r in relatives), return_exceptions=True), 60
    )
    # A child terminated by its parent's close first refuses its own close; nothing else fails
    # (a deadlock would: PostgreSQL breaks it by failing one of the transactions).
    failed = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, ApiError) and r.reason == Reason.WORKFLOW_CLOSED for r in failed)
    await carry_out(db)
    for parent, kid_lease in pairs:
        assert (await db.journal.describe(kid_lease.workflow_id)).info.status in (
            wf.WORKFLOW_STATUS_COMPLETED,
            wf.WORKFLOW_STATUS_TERMINATED,
        )
        status = (await db.journal.describe(parent.workflow_id)).info.status
        assert status == wf.WORKFLOW_STATUS_COMPLETED
    async with db.pool.connection() as conn:
        left = await (await conn.execute("SELECT count(*) FROM history.child_notices")).fetchone()
    assert left == (0,)


async def test_a_child_call_under_a_stale_fence_starts_nothing(db: Db) -> None:
    parent = await started(db.journal)
    await db.journal.load(Lease(parent.workflow_id, 2, ""))
    kid = run_id()
    stale = await refusal(db.journal.start_child(child_call(parent), child(kid)))
    assert stale.code == grpc.StatusCode.FAILED_PRECONDITION
    assert stale.reason == Reason.STALE_FENCE
    missing = await refusal(db.journal.describe(kid))
    assert missing.code == grpc.StatusCode.NOT_FOUND


async def test_a_reset_run_takes_over_the_children_its_copy_started(db: Db) -> None:
    parent = await started(db.journal)
    running, done, later = run_id(), run_id(), run_id()
    await db.journal.start_child(child_call(parent, 0, "kid"), child(running))
    await db.journal.start_child(child_call(parent, 1, "kid#2"), child(done))
    mark = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload('"m"'))
    await db.journal.record(Call(parent, "mark", "mark", 2), mark)
    await db.journal.start_child(child_call(parent, 3, "kid#3"), child(later))
    await db.journal.finish(await loaded(db, done), Outcome.RESULT, json_payload('"d"'))
    await carry_out(db)  # its outcome reaches the parent, after "mark"

    copied = await db.journal.reset(parent.workflow_id, "", "mark", 0, "again", "ops")
    await carry_out(db)

    # The copy holds the first two child calls: the new run takes those children over, the
    # closed one's outcome delivered to it; the third, started after the cut, stays the
    # replaced run's, and its close terminated it.
    assert (await db.journal.describe(running)).info.parent_run_id == copied.run_id
    assert (await db.journal.describe(later)).info.status == wf.WORKFLOW_STATUS_TERMINATED
    events = await child_events(db, parent.workflow_id)
    assert [(e.event_type, e.step_id) for e in events] == [
        (wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED, "kid"),
        (wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED, "kid#2"),
        (wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED, "kid#2"),
    ]
    assert events[2].payload.data == b'"d"'
    children = (await db.journal.describe(parent.workflow_id)).children
    assert [(c.workflow_id, c.status) for c in children] == [
        (running, wf.WORKFLOW_STATUS_RUNNING),
        (done, wf.WORKFLOW_STATUS_COMPLETED),
    ]


async def test_a_fork_fails_the_child_calls_it_copied_without_their_outcome(db: Db) -> None:
    parent = await started(db.journal)
    running, done = run_id(), run_id()
    await db.journal.start_child(child_call(parent, 0, "kid"), child(running))
    await db.journal.start_child(child_call(parent, 1, "kid#2"), child(done))
    await db.journal.finish(await loaded(db, done), Outcome.RESULT, json_payload('"d"'))
    await carry_out(db)
    forked = run_id()

    await db.journal.fork(parent.workflow_id, "", forked, "", {}, "try", "ops")
    await carry_out(db)

    # The open child stays the source's: the fork's copy of its call fails at once; the other
    # call's outcome was copied.
    events = await child_events(db, forked)
    assert [(e.event_type, e.step_id) for e in events] == [
        (wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED, "kid"),
        (wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED, "kid#2"),
        (wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED, "kid#2"),
        (wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED, "kid"),
    ]
    assert events[3].failure.type == "ChildNotForked" and events[3].child_workflow_id == running
    info = (await db.journal.describe(forked)).info
    assert info.event_count == 5
    running_info = (await db.journal.describe(running)).info
    assert running_info.parent_workflow_id == parent.workflow_id
    assert running_info.status == wf.WORKFLOW_STATUS_RUNNING
