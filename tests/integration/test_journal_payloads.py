"""Payloads stored by content, driven on the Journal and its handlers: a large payload is
stored once however many events and runs record it, reaches a worker's load as a reference and
the public reads inline, and LoadPayload hands it only to the lease of a run that names it."""

from __future__ import annotations

import inspect

import grpc

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.common.payload import json_payload
from perdure.history import store
from perdure.history.journal_api import JournalApi
from perdure.history.model import EventType, Lease, StepRecord
from perdure.history.rows import fetch_one
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, started

__all__ = ["db", "journal_dsn"]  # the fixtures

LARGE = json_payload('"' + "z" * (32 * 1024) + '"')  # over the 16 KiB default
DIGEST = store.by_content(LARGE)
_LOAD_PAYLOAD = inspect.unwrap(JournalApi.LoadPayload)


def output(payload: object = LARGE) -> StepRecord:
    return StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=payload)  # type: ignore[arg-type]


async def load_payload(db: Db, lease: Lease, digest: bytes | None) -> jpb.LoadPayloadResponse:
    handlers = JournalApi(db.journal, scheduler=None)  # type: ignore[arg-type]  # keys off
    request = jpb.LoadPayloadRequest(
        workflow_id=lease.workflow_id, fence=lease.fence, sha256=digest or b""
    )
    response: jpb.LoadPayloadResponse = await _LOAD_PAYLOAD(handlers, request, None)
    return response


async def copies(db: Db) -> int:
    async with db.pool.connection() as conn:
        row = await fetch_one(
            conn, "SELECT count(*) AS n FROM history.payloads WHERE sha256 = %s", [DIGEST]
        )
    return int(row["n"]) if row else 0


async def test_identical_outputs_of_two_steps_of_two_runs_are_stored_once(db: Db) -> None:
    first, second = await started(db.journal), await started(db.journal)
    for lease in (first, second):
        for position in range(2):
            await db.journal.record(call(lease, position), output())
    assert DIGEST is not None and await copies(db) == 1
    async with db.pool.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT count(*) AS named, count(payload) AS inline FROM history.events"
            " WHERE payload_sha256 = %s",
            [DIGEST],
        )
    assert row == {"named": 4, "inline": 0}  # each event keeps only the digest


async def test_a_worker_loads_a_reference_and_the_public_reads_the_payload(db: Db) -> None:
    lease = await started(db.journal)
    small = json_payload('"small"')
    await db.journal.record(call(lease, 0), output())
    await db.journal.record(call(lease, 1), output(small))
    loaded = await db.journal.load(Lease(lease.workflow_id, 2, ""))
    large_event, small_event = loaded.events[1], loaded.events[2]
    assert not large_event.HasField("payload")
    assert large_event.payload_ref.sha256 == DIGEST
    assert large_event.payload_ref.encoding == LARGE.encoding
    assert large_event.payload_ref.size == len(LARGE.data)
    assert small_event.payload == small and not small_event.HasField("payload_ref")
    assert loaded.history_bytes > len(LARGE.data)  # the journal's size counts it
    events, _ = await db.journal.history_page(lease.workflow_id, 0, "")
    assert events[1].payload == LARGE and not events[1].HasField("payload_ref")
    described = await db.journal.describe(lease.workflow_id)
    assert described.steps[0].output == LARGE


async def test_a_retried_record_of_a_large_output_is_the_same_record(db: Db) -> None:
    lease = await started(db.journal)
    first = await db.journal.record(call(lease, 0), output())
    again = await db.journal.record(call(lease, 0), output())
    assert again.event_id == first.event_id
    other = json_payload('"' + "w" * (32 * 1024) + '"')
    error = await refusal(db.journal.record(call(lease, 0), output(other)))
    assert error.reason == "STEP_CONFLICT"


async def test_load_payload_answers_the_run_s_own_digest_under_its_lease(db: Db) -> None:
    lease = await started(db.journal)
    await db.journal.record(call(lease, 0), output())
    answered = await load_payload(db, lease, DIGEST)
    assert answered.payload == LARGE


async def test_load_payload_of_a_digest_the_run_does_not_name_is_not_found(db: Db) -> None:
    owner, other = await started(db.journal), await started(db.journal)
    await db.journal.record(call(owner, 0), output())  # stored, but by another run
    error = await refusal(load_payload(db, other, DIGEST))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "PAYLOAD_NOT_FOUND")
    assert "z" * 10 not in error.message
    error = await refusal(load_payload(db, other, b"\x00" * 3))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_load_payload_under_a_stale_fence_is_refused_and_gives_nothing(db: Db) -> None:
    lease = await started(db.journal)
    await db.journal.record(call(lease, 0), output())
    await db.journal.load(Lease(lease.workflow_id, 2, ""))
    error = await refusal(load_payload(db, lease, DIGEST))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")
    assert "z" * 10 not in error.message
