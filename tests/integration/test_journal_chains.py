"""Run chains, driven on the Journal directly: a workflow id reused under its policy, a run
continued as new with its pending signals, the chain read back by run id, and no lease of an
earlier run reaching a later one."""

from __future__ import annotations

import asyncio

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.payload import json_payload
from perdure.history.chains import IdReusePolicy
from perdure.history.model import (
    EventType,
    Lease,
    Outcome,
    RemoteStep,
    RunStatus,
    StepAttempt,
    StepRecord,
)
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures

ALLOW, ALLOW_IF_FAILED = IdReusePolicy.ALLOW, IdReusePolicy.ALLOW_IF_FAILED


async def _history(db: Db, workflow_id: str, run: str = "") -> list[wf.HistoryEvent]:
    events, _ = await db.journal.history_page(await db.journal.run_of(workflow_id, run), 0, "")
    return events


async def test_continue_as_new_starts_the_next_run_with_the_signals_left_unconsumed(
    db: Db,
) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    first = (await db.journal.describe(run)).info.run_id
    assert await db.journal.signal(run, "msg", json_payload("1"), "a")  # event 2
    await db.journal.consume_signals(call(lease, 0), "msg", [2], json_payload("1"))
    assert await db.journal.signal(run, "msg", json_payload("2"), "b")
    assert await db.journal.signal(run, "msg", json_payload("3"), None)

    finish = db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload('{"turn": 2}'))
    assert await finish == RunStatus.CONTINUED_AS_NEW
    # Sent again (its answer was lost): the same answer, and no third run.
    again = db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload('{"turn": 2}'))
    assert await again == RunStatus.CONTINUED_AS_NEW

    latest = (await db.journal.describe(run)).info
    assert (latest.run_number, latest.previous_run_id, latest.next_run_id) == (2, first, "")
    assert latest.status == wf.WORKFLOW_STATUS_RUNNING and latest.run_id != first
    assert latest.input == json_payload('{"turn": 2}')
    events = await _history(db, run)
    assert [(e.event_type, e.signal_id, e.payload.data) for e in events] == [
        (wf.EVENT_TYPE_WORKFLOW_STARTED, "", b'{"turn": 2}'),
        (wf.EVENT_TYPE_SIGNAL_RECEIVED, "b", b"2"),
        (wf.EVENT_TYPE_SIGNAL_RECEIVED, "", b"3"),
    ]
    # The run before is intact under its run id, and names the next.
    before = (await db.journal.describe(await db.journal.run_of(run, first))).info
    assert before.workflow_id == run and before.status == wf.WORKFLOW_STATUS_CONTINUED_AS_NEW
    assert (before.run_number, before.next_run_id) == (1, latest.run_id)
    closing = (await _history(db, run, first))[-1]
    assert closing.event_type == wf.EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW
    assert closing.payload == json_payload('{"turn": 2}')
    # A signal id is received once per workflow id, consumed in run 1 or carried to run 2.
    assert not await db.journal.signal(run, "msg", json_payload("1"), "a")
    assert not await db.journal.signal(run, "msg", json_payload("2"), "b")
    # The list shows the latest run only.
    listed, _ = await db.journal.list_page("default", None, None, 100, "", run)
    assert [(r.run_id, r.run_number) for r in listed] == [(latest.run_id, 2)]
    # Another continue under the same lease is not the one it made: refused.
    other = db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload('{"turn": 3}'))
    assert (await refusal(other)).reason == "STALE_FENCE"


async def test_no_lease_of_an_earlier_run_reaches_the_next(db: Db) -> None:
    lease = await started(db.journal, fence=4)
    await db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload("null"))
    record = StepRecord(EventType.STEP_COMPLETED, payload=json_payload("1"))
    error = await refusal(db.journal.record(call(lease, 0), record))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")
    assert (await refusal(db.journal.load(lease))).reason == "STALE_FENCE"
    # The scheduler's next grant is above: it loads the new run, from its start.
    loaded = await db.journal.load(Lease(lease.workflow_id, 5, ""))
    assert loaded.info.run_number == 2 and len(loaded.events) == 1
    assert (await refusal(db.journal.record(call(lease, 0), record))).reason == "STALE_FENCE"


async def test_no_step_lease_of_an_earlier_run_reaches_the_same_step_of_the_next(db: Db) -> None:
    lease = await started(db.journal, fence=1)
    step = RemoteStep("charge", "q", json_payload("{}"), retry={}, timeout_seconds=None)
    await db.journal.schedule_step(call(lease, 0, "charge"), step)
    old = Lease(lease.workflow_id, 3, "", "charge")
    await db.journal.load_step(old)  # its executor is still at it when the run continues
    await db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload("null"))
    nxt = Lease(lease.workflow_id, 2, "")
    await db.journal.load(nxt)
    await db.journal.schedule_step(call(nxt, 0, "charge"), step)  # the same step id again
    assert (await refusal(db.journal.load_step(old))).reason == "STALE_FENCE"
    done = StepAttempt(old, 1, EventType.STEP_COMPLETED, json_payload("1"), None, None, None)
    assert (await refusal(db.journal.record_step_attempt(done))).reason == "STALE_FENCE"
    task = await db.journal.load_step(Lease(lease.workflow_id, 4, "", "charge"))
    assert (task.attempt, task.attempt_lost) == (1, False)


async def test_a_workflow_id_is_reused_only_as_its_policy_says(db: Db) -> None:
    workflow_id, given = run_id(), json_payload('"in"')

    async def start(
        policy: IdReusePolicy = IdReusePolicy.REFUSE, value: str = '"in"', request: str = ""
    ) -> tuple[bool, RunStatus, str]:
        return await db.journal.start(
            workflow_id, "flow", "q", json_payload(value), None, policy, request or None
        )

    async def close(fence: int, outcome: Outcome) -> None:
        lease = Lease(workflow_id, fence, "")
        await db.journal.load(lease)
        value = given if outcome is Outcome.RESULT else wf.Failure(type="Boom", message="no")
        await db.journal.finish(lease, outcome, value)

    started_now, _, first = await start()
    assert started_now
    # While it is open, no policy makes a second run.
    assert await start(ALLOW) == (False, RunStatus.RUNNING, first)
    assert (await refusal(start(ALLOW, '"other"'))).reason == "WORKFLOW_ID_CONFLICT"
    await close(1, Outcome.RESULT)
    # REFUSE (the default) and ALLOW_IF_FAILED after a completed run: the old run, or a conflict.
    for policy in (IdReusePolicy.REFUSE, IdReusePolicy.UNSPECIFIED, ALLOW_IF_FAILED):
        assert await start(policy) == (False, RunStatus.COMPLETED, first)
        error = await refusal(start(policy, '"other"'))
        assert error.code == grpc.StatusCode.ALREADY_EXISTS and "completed" in error.message
    # ALLOW: a new run, with a journal of its own; the first stays as it was.
    started_now, status, second = await start(ALLOW, '"two"', request="req-2")
    assert (started_now, status) == (True, RunStatus.RUNNING) and second != first
    assert await start(ALLOW, '"two"', request="req-2") == (False, RunStatus.RUNNING, second)
    described = (await db.journal.describe(workflow_id)).info
    assert (described.run_id, described.run_number, described.previous_run_id) == (
        second,
        2,
        first,
    )
    assert [e.payload.data for e in await _history(db, workflow_id)] == [b'"two"']
    old = (await db.journal.describe(await db.journal.run_of(workflow_id, first))).info
    assert (old.status, old.result, old.next_run_id) == (
        wf.WORKFLOW_STATUS_COMPLETED,
        given,
        second,
    )
    # ALLOW_IF_FAILED after a failed run: a new run. A start sent again with the request id
    # of one that made a run returns that run, even once it is closed.
    await close(2, Outcome.FAILURE)
    started_now, _, third = await start(ALLOW_IF_FAILED, '"three"')
    assert started_now and third not in (first, second)
    await close(3, Outcome.RESULT)
    assert await start(ALLOW, '"two"', request="req-2") == (False, RunStatus.FAILED, second)
    # An unknown run id of the workflow id is NOT_FOUND.
    error = await refusal(db.journal.run_of(workflow_id, "no-such-run"))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")


async def test_starts_racing_for_a_closed_run_s_id_make_one_new_run(db: Db) -> None:
    workflow_id = run_id()
    await db.journal.start(workflow_id, "flow", "q", json_payload('"in"'))
    lease = Lease(workflow_id, 1, "")
    await db.journal.load(lease)
    await db.journal.finish(lease, Outcome.RESULT, json_payload("1"))
    racing = [
        db.journal.start(workflow_id, "flow", "q", json_payload('"again"'), None, ALLOW, f"r{n}")
        for n in range(4)
    ]
    answers = await asyncio.gather(*racing)
    assert sorted(started for started, _, _ in answers) == [False, False, False, True]
    assert len({run for _, _, run in answers}) == 1
    assert (await db.journal.describe(workflow_id)).info.run_number == 2


async def test_signals_racing_a_continue_as_new_land_once_in_the_next_run(db: Db) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    sends = [db.journal.signal(run, "msg", json_payload(str(n)), f"s{n}") for n in range(24)]
    finish = db.journal.finish(lease, Outcome.CONTINUE_AS_NEW, json_payload("null"))
    continued, *accepted = await asyncio.gather(finish, *sends)
    assert continued == RunStatus.CONTINUED_AS_NEW and all(accepted)
    # None was consumed: each is in the next run once, arrived there or carried over.
    received = [e.signal_id for e in await _history(db, run) if e.signal_id]
    assert sorted(received) == sorted(f"s{n}" for n in range(24))
