"""Signals, driven on the Journal directly: a signal id received once, each signal consumed
once, a consumption sent again answered as the first."""

from __future__ import annotations

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.payload import json_payload
from perdure.history.model import Lease
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, started

__all__ = ["db", "journal_dsn"]  # the fixtures


async def test_a_signal_id_is_received_once(db: Db) -> None:
    lease = await started(db.journal)
    run = lease.workflow_id
    assert await db.journal.signal(run, "go", json_payload("1"), "sig-1")
    assert not await db.journal.signal(run, "go", json_payload("1"), "sig-1")
    assert not await db.journal.signal(run, "go", json_payload("2"), "sig-1")  # the id decides
    assert await db.journal.signal(run, "go", json_payload("1"), None)  # no id: no dedupe
    assert await db.journal.signal(run, "go", json_payload("1"), None)
    events = (await db.journal.load(lease)).events
    assert [e.event_type for e in events].count(wf.EVENT_TYPE_SIGNAL_RECEIVED) == 3


async def test_signal_with_start_starts_once_and_dedupes_the_signal(db: Db) -> None:
    run = "run-sws-" + __name__.rsplit(".", 1)[-1]
    args = (run, "flow", "q", json_payload("0"), "go", json_payload("1"), "sig")
    assert await db.journal.signal_with_start(*args) == (True, True)
    assert await db.journal.signal_with_start(*args) == (False, False)


async def test_each_signal_is_consumed_once(db: Db) -> None:
    lease = await started(db.journal)
    await db.journal.signal(lease.workflow_id, "go", json_payload("1"), None)  # event 2
    first = await db.journal.consume_signals(call(lease, 0), "go", [2], json_payload("1"))
    again = await db.journal.consume_signals(call(lease, 0), "go", [2], json_payload("1"))
    assert again == first  # its answer was lost: the same answer
    error = await refusal(db.journal.consume_signals(call(lease, 1), "go", [2], json_payload("1")))
    assert (error.code, error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "SIGNAL_ALREADY_CONSUMED",
    )


async def test_a_consumption_must_name_the_run_s_signals_once(db: Db) -> None:
    lease = await started(db.journal)
    await db.journal.signal(lease.workflow_id, "go", json_payload("1"), None)  # event 2
    error = await refusal(
        db.journal.consume_signals(call(lease, 0), "go", [2, 2], json_payload("1"))
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and "more than once" in error.message
    error = await refusal(db.journal.consume_signals(call(lease, 0), "go", [1], json_payload("1")))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and "not signals" in error.message


async def test_a_stale_holder_consumes_nothing(db: Db) -> None:
    lease = await started(db.journal, fence=1)
    await db.journal.signal(lease.workflow_id, "go", json_payload("1"), None)
    await db.journal.load(Lease(lease.workflow_id, 2, ""))
    error = await refusal(db.journal.consume_signals(call(lease, 0), "go", [2], json_payload("1")))
    assert error.reason == "STALE_FENCE"
