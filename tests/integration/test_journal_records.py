"""A worker's records, driven on the Journal directly: a retried record is answered as the
first was, a different record at the same call is refused, a closed run takes no more, and a
start sent again is the same start."""

from __future__ import annotations

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.payload import json_payload
from perdure.history.deadlines import EXPIRE_BATCH, expire_runs
from perdure.history.model import (
    EventType,
    Lease,
    Outcome,
    RunStatus,
    StepRecord,
    Wait,
    WaitKind,
)
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures


def done(value: str) -> StepRecord:
    return StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload(value))


async def test_an_identical_retry_is_answered_as_the_first(db: Db) -> None:
    lease = await started(db.journal)
    first = await db.journal.record(call(lease, 0), done("1"))
    again = await db.journal.record(call(lease, 0), done("1"))
    assert again.event_id == first.event_id == 2
    loaded = await db.journal.load(lease)
    assert len(loaded.events) == 2  # WORKFLOW_STARTED and the one STEP_COMPLETED


async def test_a_different_record_at_the_same_call_is_a_conflict(db: Db) -> None:
    lease = await started(db.journal)
    await db.journal.record(call(lease, 0), done("1"))
    for other in (call(lease, 0), call(lease, 1, step_id="step-0")):  # position, or step id
        error = await refusal(db.journal.record(other, done("2")))
        assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STEP_CONFLICT")


async def test_a_failed_attempt_leaves_the_position_to_the_outcome(db: Db) -> None:
    lease = await started(db.journal)
    failure = {"type": "Boom", "message": "no", "stack_trace": ""}
    retry = StepRecord(
        EventType.STEP_ATTEMPT_FAILED, positioned=False, attempt=1, failure=failure, due_in=5
    )
    failed = await db.journal.record(call(lease, 0), retry)
    assert failed.due_at is not None  # the retry time, by the database's clock
    assert (await db.journal.record(call(lease, 0), retry)).event_id == failed.event_id
    outcome = StepRecord(EventType.STEP_COMPLETED, attempt=2, payload=json_payload("1"))
    assert (await db.journal.record(call(lease, 0), outcome)).event_id == failed.event_id + 1


async def test_a_closed_run_takes_no_more_writes(db: Db) -> None:
    lease = await started(db.journal)
    assert await db.journal.finish(lease, Outcome.RESULT, json_payload("9")) == RunStatus.COMPLETED
    # The same close sent again is acknowledged; any other write is refused.
    assert await db.journal.finish(lease, Outcome.RESULT, json_payload("9")) == RunStatus.COMPLETED
    error = await refusal(db.journal.finish(lease, Outcome.RESULT, json_payload("8")))
    assert error.reason == "WORKFLOW_CLOSED" and "another outcome" in error.message
    error = await refusal(db.journal.record(call(lease, 0), done("1")))
    assert error.reason == "WORKFLOW_CLOSED"
    error = await refusal(db.journal.suspend(lease, Wait(WaitKind.SIGNAL, "go", None)))
    assert error.reason == "WORKFLOW_CLOSED"
    error = await refusal(db.journal.signal(lease.workflow_id, "go", json_payload("1"), None))
    assert error.reason == "WORKFLOW_CLOSED"
    error = await refusal(db.journal.cancel(lease.workflow_id, "stop", ""))
    assert error.reason == "WORKFLOW_CLOSED"


async def test_a_parked_run_is_closed_for_its_loads(db: Db) -> None:
    lease = await started(db.journal)
    park = wf.Failure(type="Nondeterminism", message="x")
    assert await db.journal.finish(lease, Outcome.PARK, park) == RunStatus.PARKED
    error = await refusal(db.journal.load(lease))
    assert error.reason == "WORKFLOW_CLOSED" and "parked" in error.message


async def test_a_start_sent_again_is_the_same_start(db: Db) -> None:
    workflow_id = run_id()
    wakes = db.wakes.count
    assert (await db.journal.start(workflow_id, "flow", "q", json_payload("1")))[:2] == (
        True,
        RunStatus.RUNNING,
    )
    assert db.wakes.count == wakes + 1  # its task is scheduled through the outbox
    assert (await db.journal.start(workflow_id, "flow", "q", json_payload("1")))[:2] == (
        False,
        RunStatus.RUNNING,
    )
    error = await refusal(db.journal.start(workflow_id, "flow", "q", json_payload("2")))
    assert (error.code, error.reason) == (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT")
    assert "different input" in error.message


async def test_loads_that_find_nothing_new_park_a_crash_loop(db: Db) -> None:
    lease = await started(db.journal, fence=1)  # the fixture's limit is 3 idle loads
    for fence in (2, 3):
        await db.journal.load(Lease(lease.workflow_id, fence, ""))
    error = await refusal(db.journal.load(Lease(lease.workflow_id, 4, "")))
    assert error.reason == "WORKFLOW_CLOSED" and "parked" in error.message


async def test_a_run_past_its_deadline_is_failed_and_its_holder_fenced_out(db: Db) -> None:
    workflow_id = run_id()
    await db.journal.start(workflow_id, "flow", "q", json_payload("1"), execution_timeout=0)
    lease = Lease(workflow_id, 1, "")
    await db.journal.load(lease)
    while await expire_runs(db.pool) == EXPIRE_BATCH:  # other tests' runs have no deadline
        pass
    described = await db.journal.describe(workflow_id)
    assert described.info.status == wf.WORKFLOW_STATUS_FAILED
    assert described.info.failure.type == "ExecutionTimeout"
    error = await refusal(db.journal.record(call(lease, 0), done("1")))
    assert error.reason == "WORKFLOW_CLOSED"


async def test_a_start_unless_cancel_requested_stays_out_of_a_cancelled_runs_journal(
    db: Db,
) -> None:
    lease = await started(db.journal)
    step = call(lease, 0)
    beside = StepRecord(
        EventType.STEP_ATTEMPT_STARTED, positioned=False, attempt=1, unless_cancel=True
    )
    first = await db.journal.record(step, beside)  # no cancel request: journaled
    assert first.event_id == 2 and not first.cancel_requested
    await db.journal.cancel(lease.workflow_id, "no longer needed", "test")
    kept_out = await db.journal.record(call(lease, 1), beside)
    assert (kept_out.event_id, kept_out.cancel_requested) == (0, True)
    loaded = await db.journal.load(lease)
    assert [event.event_type for event in loaded.events][-2:] == [
        wf.EVENT_TYPE_STEP_ATTEMPT_STARTED,
        wf.EVENT_TYPE_CANCEL_REQUESTED,
    ]
    # Without the flag (the cancellation delivered), a start is journaled as ever.
    plain = StepRecord(EventType.STEP_ATTEMPT_STARTED, positioned=False, attempt=1)
    assert (await db.journal.record(call(lease, 1), plain)).event_id == 4
    # A stale lease's start is refused for its fence, not answered as kept out.
    stale = Lease(lease.workflow_id, lease.fence - 1, lease.key)
    error = await refusal(db.journal.record(call(stale, 2), beside))
    assert error.reason == "STALE_FENCE"
