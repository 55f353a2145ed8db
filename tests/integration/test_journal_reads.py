"""Reads, driven on the Journal directly: history and run lists a page at a time, within the
page limits, and published state."""

from __future__ import annotations

import uuid

import grpc
import pytest

from perdure.common import limits
from perdure.common.payload import json_payload
from perdure.history.model import Call, EventType, RunStatus, StepRecord
from perdure.history.reads import MAX_PAGE_SIZE, page_size
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures


async def test_history_pages_follow_their_tokens_to_the_end(db: Db) -> None:
    lease = await started(db.journal)
    for position in range(4):
        record = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload("1"))
        await db.journal.record(call(lease, position), record)
    seen, token = [], ""
    while True:
        events, token = await db.journal.history_page(lease.workflow_id, 2, token)
        assert len(events) <= 2
        seen += [event.event_id for event in events]
        if not token:
            break
    assert seen == [1, 2, 3, 4, 5]
    after, _ = await db.journal.history_page(lease.workflow_id, 0, "", after_event_id=3)
    assert [event.event_id for event in after] == [4, 5]


async def test_runs_are_listed_newest_first_a_page_at_a_time(db: Db) -> None:
    prefix = f"list-{uuid.uuid4().hex[:6]}-"
    for index in range(3):
        await db.journal.start(f"{prefix}{index}", "flow", "q", json_payload("1"))
    first, token = await db.journal.list_page("default", None, None, 2, "", id_prefix=prefix)
    rest, end = await db.journal.list_page("default", None, None, 2, token, id_prefix=prefix)
    assert [run.workflow_id for run in first + rest] == [f"{prefix}{i}" for i in (2, 1, 0)]
    assert token and not end
    running, _ = await db.journal.list_page(
        "default", RunStatus.COMPLETED, None, 10, "", id_prefix=prefix
    )
    assert running == []


def test_page_sizes_are_capped() -> None:
    assert page_size(0) == 100
    assert page_size(MAX_PAGE_SIZE + 1) == MAX_PAGE_SIZE


async def test_published_state_is_the_latest_value(db: Db) -> None:
    lease = await started(db.journal)
    for position, value in enumerate(("1", "2")):
        record = StepRecord(EventType.STATE_UPDATED, name="progress", payload=json_payload(value))
        await db.journal.record(call(lease, position), record)
    row = await db.journal.query(lease.workflow_id, "progress")
    assert bytes(row["payload"]) == b"2"
    error = await refusal(db.journal.query(lease.workflow_id, "other"))
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "STATE_NOT_FOUND")
    error = await refusal(db.journal.describe(run_id()))
    assert error.reason == "WORKFLOW_NOT_FOUND"


async def test_a_description_reads_only_the_outputs_it_shows_and_the_current_values(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = await started(db.journal)
    large = [json_payload('"' + letter * 32 * 1024 + '"') for letter in "abc"]
    for position, output in enumerate([*large, json_payload('"small"')]):
        record = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=output)
        await db.journal.record(call(lease, position), record)
    for position, value in ((4, '"old"'), (5, '"new"')):
        record = StepRecord(EventType.STATE_UPDATED, name="phase", payload=json_payload(value))
        await db.journal.record(call(lease, position), record)
    await db.journal.signal(lease.workflow_id, "go", json_payload('"taken"'), None)
    await db.journal.signal(lease.workflow_id, "go", json_payload('"pending"'), None)
    taken = Call(lease, "$signal:go", "$signal:go", 6)
    await db.journal.consume_signals(taken, "go", [8], json_payload('"taken"'))
    monkeypatch.setattr(limits, "DESCRIBED_OUTPUT_BYTES", 70 * 1024)  # two large outputs

    described = await db.journal.describe(lease.workflow_id)

    shown = [step.output for step in described.steps if not step.output_omitted]
    assert shown == [large[0], large[1], json_payload('"small"')]
    assert [step.step_id for step in described.steps if step.output_omitted] == ["step-2"]
    assert not described.steps[2].HasField("output")
    assert described.state == {"phase": json_payload('"new"')}
    assert [signal.payload for signal in described.pending_signals] == [json_payload('"pending"')]
