"""The fence, driven on the Journal directly: only the latest load's holder (and its key)
writes; a load takes a lease up, again when retried, never below the mark; a remote step's
lease works alike."""

from __future__ import annotations

import grpc

from perdure.common.payload import json_payload
from perdure.history.model import (
    EventType,
    Lease,
    RemoteStep,
    StepAttempt,
    StepRecord,
)
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures

DONE = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload("1"))


async def test_a_stale_fence_is_refused_once_a_newer_load_advanced_the_mark(db: Db) -> None:
    old = await started(db.journal, fence=1)
    new = Lease(old.workflow_id, 2, "")
    await db.journal.load(new)
    error = await refusal(db.journal.record(call(old, 0), DONE))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")
    assert "a newer lease (fence 2)" in error.message
    appended = await db.journal.record(call(new, 0), DONE)  # the new holder writes
    assert appended.event_id == 2


async def test_a_load_below_the_mark_is_refused_and_a_retried_load_is_taken(db: Db) -> None:
    lease = await started(db.journal, fence=3)
    again = await db.journal.load(lease)  # its answer was lost: the same fence loads again
    assert again.info.fence == 3
    error = await refusal(db.journal.load(Lease(lease.workflow_id, 2, "")))
    assert error.reason == "STALE_FENCE"


async def test_a_fence_never_loaded_writes_nothing(db: Db) -> None:
    lease = await started(db.journal, fence=1)
    ahead = Lease(lease.workflow_id, 5, "")
    error = await refusal(db.journal.record(call(ahead, 0), DONE))
    assert error.reason == "FENCE_NOT_LOADED"
    assert "call LoadJournal with it first" in error.message


async def test_another_key_learns_nothing_of_the_lease(db: Db) -> None:
    lease = await started(db.journal, key="key-a", fence=1)
    intruder = Lease(lease.workflow_id, 1, "key-b")
    error = await refusal(db.journal.record(call(intruder, 0), DONE))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "LEASE_NOT_HELD")
    assert "API key key-b holds no lease" in error.message
    # Nor of a run that does not exist: the same answer.
    error = await refusal(db.journal.load(Lease(run_id(), 1, "key-b")))
    assert error.reason == "LEASE_NOT_HELD"


async def test_without_keys_an_unknown_run_is_not_found(db: Db) -> None:
    error = await refusal(db.journal.load(Lease(run_id(), 1, "")))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND")


async def test_a_remote_step_s_lease_is_fenced_by_its_own_mark(db: Db) -> None:
    run = await started(db.journal, fence=1)
    step = RemoteStep("charge", "q", json_payload("{}"), retry={}, timeout_seconds=None)
    await db.journal.schedule_step(call(run, 0, "charge"), step)
    first = Lease(run.workflow_id, 1, "", "charge")
    await db.journal.load_step(first)
    second = Lease(run.workflow_id, 2, "", "charge")
    task = await db.journal.load_step(second)
    assert task.attempt == 1 and task.attempt_lost  # the first holder's attempt is lost
    outcome = StepAttempt(first, 1, EventType.STEP_COMPLETED, json_payload("1"), None, None, None)
    error = await refusal(db.journal.record_step_attempt(outcome))
    assert error.reason == "STALE_FENCE"
    assert "step charge of workflow" in error.message
    error = await refusal(db.journal.load_step(Lease(run.workflow_id, 1, "", "nope")))
    assert error.reason == "STEP_NOT_FOUND"


async def test_a_heartbeat_is_fenced_and_carries_the_cancel_request(db: Db) -> None:
    old = await started(db.journal, fence=1)
    assert not await db.journal.heartbeat(old, "slow", 1, json_payload('"half"'))
    await db.journal.cancel(old.workflow_id, "enough", "")
    assert await db.journal.heartbeat(old, "slow", 1, None)  # the details kept
    loaded = await db.journal.load(Lease(old.workflow_id, 2, ""))
    assert [(p["step_id"], bytes(p["details"].data)) for p in loaded.progress] == [
        ("slow", b'"half"')
    ]
    error = await refusal(db.journal.heartbeat(old, "slow", 1, None))
    assert error.reason == "STALE_FENCE"
