"""Resume, reset and fork, driven on the Journal directly: what a reset copies and carries
(signals, remote steps, payloads stored by content), that no lease of the run it replaced
reaches the new one, and a fork's overrides."""

from __future__ import annotations

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.payload import json_payload
from perdure.history.model import EventType, Lease, Outcome, RemoteStep, RunStatus, StepRecord
from perdure.history.rows import fetch_all, fetch_one
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures

LARGE = json_payload('"' + "x" * 20_000 + '"')  # stored by content (PERDURE_PAYLOAD_REF_BYTES)


async def _history(db: Db, workflow_id: str, run: str = "") -> list[wf.HistoryEvent]:
    events, _ = await db.journal.history_page(await db.journal.run_of(workflow_id, run), 0, "")
    return events


async def _payloads(db: Db) -> int:
    async with db.pool.connection() as conn:
        row = await fetch_one(conn, "SELECT count(*) AS n FROM history.payloads", [])
    assert row is not None
    return int(row["n"])


async def test_a_reset_copies_before_its_step_and_carries_the_signals_after_it(db: Db) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    first = (await db.journal.describe(run)).info.run_id
    done = StepRecord(EventType.STEP_COMPLETED, payload=LARGE)
    await db.journal.record(call(lease, 0), done)  # event 2
    assert await db.journal.signal(run, "msg", json_payload("1"), "a")  # event 3
    await db.journal.signal(run, "msg", json_payload("2"), "b")  # 4, consumed after the cut
    await db.journal.consume_signals(call(lease, 1), "msg", [3], json_payload("[1]"))  # 5
    remote = RemoteStep("resize", "q", json_payload("{}"), retry={}, timeout_seconds=None)
    await db.journal.schedule_step(call(lease, 2, "resize"), remote)  # 6, no outcome yet
    await db.journal.record(call(lease, 3), done)  # 7: the step reset to
    await db.journal.consume_signals(call(lease, 4), "msg", [4], json_payload("[2]"))
    await db.journal.signal(run, "msg", json_payload("3"), "c")
    stored = await _payloads(db)

    copied = await db.journal.reset(run, "", "step-3", 0, "again", "ops")

    assert copied.copied_up_to_event_id == 6
    old = await _history(db, run, first)
    new = await _history(db, run)
    assert new[1:6] == old[1:6] and new[0].payload == old[0].payload
    # Every signal received after the cut is carried, consumed there or not, in order.
    assert [(e.event_type, e.signal_id) for e in new[6:]] == [
        (wf.EVENT_TYPE_SIGNAL_RECEIVED, "c"),
    ]
    described = await db.journal.describe(run)
    assert [s.signal_id for s in described.pending_signals] == ["b", "c"]  # b: consumed later
    info = described.info
    assert (info.run_id, info.previous_run_id, info.reset_from_run_id) == (
        copied.run_id,
        first,
        first,
    )
    assert info.status == wf.WORKFLOW_STATUS_RUNNING and info.copied_up_to_event_id == 6
    assert await _payloads(db) == stored  # the large output is referenced, not stored again
    # The run it replaced was open: terminated, naming the new run.
    before = (await db.journal.describe(await db.journal.run_of(run, first))).info
    assert before.status == wf.WORKFLOW_STATUS_TERMINATED
    assert before.failure.message == f"reset to run {copied.run_id}"
    assert before.next_run_id == copied.run_id
    # No lease of the old run reaches the new one; the next lease loads it and goes on.
    record = StepRecord(EventType.STEP_COMPLETED, payload=json_payload("1"))
    assert (await refusal(db.journal.record(call(lease, 3), record))).reason == "STALE_FENCE"
    nxt = Lease(run, lease.fence + 1, "")
    loaded = await db.journal.load(nxt)
    assert [e.event_id for e in loaded.events] == list(range(1, 8))
    await db.journal.record(call(nxt, 3), record)
    # The remote step without an outcome in the copied part has a step task again.
    task = await db.journal.load_step(Lease(run, 5, "", "resize"))
    assert task.attempt == 1
    # A reset from the first run again: the signals the run it replaces left unconsumed are
    # carried too, each signal id once.
    assert await db.journal.signal(run, "msg", json_payload("4"), "d")
    third = await db.journal.reset(run, first, "", 7, "from the first run", "ops")
    pending = (await db.journal.describe(run)).pending_signals
    assert [s.signal_id for s in pending] == ["b", "c", "d"]
    assert (await db.journal.describe(run)).info.previous_run_id == copied.run_id != third.run_id


async def test_a_resume_opens_only_a_parked_run(db: Db) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    refused = await refusal(db.journal.resume(run, "", "why", ""))
    assert refused.reason == "WORKFLOW_NOT_PARKED" and "running" in refused.message
    remote = RemoteStep("resize", "q", json_payload("{}"), retry={}, timeout_seconds=None)
    await db.journal.schedule_step(call(lease, 0, "resize"), remote)  # no outcome yet
    parked = wf.Failure(type="NonDeterminismError", message="reordered")
    assert await db.journal.finish(lease, Outcome.PARK, parked) == RunStatus.PARKED
    wakes = db.wakes.count
    assert (
        await db.journal.resume(run, "", "fixed", "ops")
        == (await db.journal.describe(run)).info.run_id
    )
    assert db.wakes.count == wakes + 1
    info = (await db.journal.describe(run)).info
    assert info.status == wf.WORKFLOW_STATUS_RUNNING
    assert not info.HasField("failure") and not info.HasField("close_time")
    types = [e.event_type for e in await _history(db, run)]
    assert types[-2:] == [wf.EVENT_TYPE_WORKFLOW_PARKED, wf.EVENT_TYPE_WORKFLOW_RESUMED]
    async with db.pool.connection() as conn:
        row = await fetch_one(
            conn, "SELECT idle_loads FROM history.workflows WHERE workflow_id = %s", [run]
        )
        audited = await fetch_one(
            conn,
            "SELECT key_id, details FROM history.audit_log WHERE target = %s"
            " AND action = 'WORKFLOW_RESUMED'",
            [run],
        )
        requests = await fetch_all(
            conn,
            "SELECT step_id, wake_reason, closed FROM history.outbox WHERE workflow_id = %s"
            " ORDER BY id",
            [run],
        )
    assert row is not None and row["idle_loads"] == 0
    # Its own task and its remote step's reopen at the scheduler (the park's retirement, not
    # relayed here, is dropped).
    resumed = {(r["step_id"], r["closed"]) for r in requests if r["wake_reason"] == "resume"}
    assert resumed == {(None, False), ("resize", False)}
    assert not any(r["closed"] for r in requests)
    assert audited is not None and audited["key_id"] == "ops"
    assert audited["details"] == {"reason": "fixed"}
    # Its next lease loads it again.
    loaded = await db.journal.load(Lease(run, lease.fence + 1, ""))
    assert loaded.info.status == wf.WORKFLOW_STATUS_RUNNING


async def test_a_fork_replaces_the_overridden_outputs_and_leaves_its_source(db: Db) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    for position in range(3):
        value = json_payload(str(position))
        await db.journal.record(
            call(lease, position), StepRecord(EventType.STEP_COMPLETED, payload=value)
        )
    source = await _history(db, run)
    fork = run_id()

    copied = await db.journal.fork(run, "", fork, "", {"step-1": LARGE}, "what if", "ops")

    assert copied.copied_up_to_event_id == len(source)  # an open run: all of it
    events = await _history(db, fork)
    outputs = [e.payload.data for e in events if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    assert outputs == [b"0", LARGE.data, b"2"]
    info = (await db.journal.describe(fork)).info
    assert (info.forked_from_workflow_id, info.run_number) == (run, 1)
    assert await _history(db, run) == source
    again = await refusal(db.journal.fork(run, "", fork, "", {}, "", ""))
    assert again.reason == "WORKFLOW_ID_CONFLICT"
    missing = await refusal(db.journal.fork(run, "", run_id(), "step-1", {"step-2": LARGE}, "", ""))
    assert missing.reason == "STEP_NOT_IN_JOURNAL" and "'step-2'" in missing.message
