"""The paged load, driven on the journal's handlers (JournalApi, no scheduler: keys off) and the
Journal directly: pages bounded by bytes, `after_event_id`, `previous_fence`, the journal's
length and bytes, and later pages that read under the fence without loading again."""

from __future__ import annotations

import inspect

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.common.limits import DEFAULT_JOURNAL_PAGE_BYTES
from perdure.common.payload import json_payload
from perdure.history import store
from perdure.history.deadlines import EXPIRE_BATCH, expire_runs
from perdure.history.journal import Journal
from perdure.history.journal_api import JournalApi
from perdure.history.model import EventType, Lease, Loaded, StepRecord
from perdure.history.rows import fetch_one
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, run_id, started

__all__ = ["db", "journal_dsn"]  # the fixtures

_LOAD = inspect.unwrap(JournalApi.LoadJournal)


def done(value: str = "1") -> StepRecord:
    return StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload(value))


def api(db: Db, page_bytes: int = DEFAULT_JOURNAL_PAGE_BYTES) -> JournalApi:
    """The journal's handlers over a Journal whose pages hold `page_bytes` of events."""
    journal = Journal(db.pool, db.wakes, crash_loop_limit=3, page_bytes=page_bytes)
    return JournalApi(journal, scheduler=None)  # type: ignore[arg-type]  # keys off: unused


async def load(
    handlers: JournalApi, lease: Lease, after: int = 0, *, later_page: bool = False
) -> jpb.LoadJournalResponse:
    request = jpb.LoadJournalRequest(
        workflow_id=lease.workflow_id,
        fence=lease.fence,
        after_event_id=after,
        later_page=later_page,
    )
    response: jpb.LoadJournalResponse = await _LOAD(handlers, request, None)
    return response


async def recorded(db: Db, steps: int, value: str = "1") -> Lease:
    lease = await started(db.journal)
    for position in range(steps):
        await db.journal.record(call(lease, position), done(value))
    return lease


async def test_a_journal_comes_in_pages_that_follow_on_to_its_end(db: Db) -> None:
    lease = await recorded(db, 5, '"' + "x" * 300 + '"')
    handlers = api(db, page_bytes=1200)  # two such events a page (each ~600 bytes reckoned)
    seen, after, pages = [], 0, 0
    while True:
        page = await load(handlers, lease, after, later_page=after > 0)
        pages += 1
        assert page.events, "every page holds at least one event"
        seen += [event.event_id for event in page.events]
        assert page.history_length == 6
        if not page.more:
            break
        after = page.events[-1].event_id
    assert seen == [1, 2, 3, 4, 5, 6]
    assert pages == 3
    tiny = await load(api(db, page_bytes=1), lease)  # an event larger than the page still goes
    assert [event.event_id for event in tiny.events] == [1] and tiny.more


async def test_after_event_id_answers_only_later_events(db: Db) -> None:
    lease = await recorded(db, 3)
    page = await load(api(db), lease, after=2)
    assert [event.event_id for event in page.events] == [3, 4]
    assert not page.more
    assert page.workflow.workflow_id == lease.workflow_id
    error = await refusal(load(api(db), lease, after=-1))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "after_event_id" in error.message


async def test_previous_fence_is_the_mark_before_the_load_or_the_request_s_own(db: Db) -> None:
    handlers = api(db)
    lease = await recorded(db, 1)  # loaded under fence 1
    second = Lease(lease.workflow_id, 4, "")
    first_load = await load(handlers, second)
    assert first_load.previous_fence == 1  # the mark the load raised
    assert (await load(handlers, second)).previous_fence == 4  # a retried load: its own
    assert (await load(handlers, second, after=1, later_page=True)).previous_fence == 4  # its own
    # A later page sent as a load (an older worker's): answered the same.
    assert (await load(handlers, second, after=1)).previous_fence == 4
    # A sticky resume: a new fence loading after its cached position raises the mark too.
    resumed = await load(handlers, Lease(lease.workflow_id, 5, ""), after=2)
    assert resumed.previous_fence == 4
    assert [event.event_id for event in resumed.events] == []
    assert resumed.workflow.fence == 5


async def test_a_later_page_under_a_stale_fence_is_refused(db: Db) -> None:
    handlers = api(db, page_bytes=1)
    lease = await recorded(db, 3)
    await load(handlers, Lease(lease.workflow_id, 2, ""))
    error = await refusal(load(handlers, lease, after=1, later_page=True))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")


async def test_later_pages_are_no_new_load_for_the_crash_loop_count(db: Db) -> None:
    handlers = api(db, page_bytes=1)
    lease = await recorded(db, 2)  # loaded once by `started`, then records
    for fence in (2, 3):  # two loads that record nothing, each reading every page
        held = Lease(lease.workflow_id, fence, "")
        page = await load(handlers, held)
        while page.more:
            page = await load(handlers, held, page.events[-1].event_id, later_page=True)
    async with db.pool.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT idle_loads FROM history.workflows WHERE workflow_id = %s",
            [lease.workflow_id],
        )
    assert row == {"idle_loads": 2}  # one per load, however many pages


async def test_history_bytes_is_kept_by_every_append(db: Db) -> None:
    lease = await recorded(db, 3, '"' + "y" * 1000 + '"')
    await db.journal.signal(lease.workflow_id, "go", json_payload('"now"'), None)
    failure = {"type": "E", "message": "boom", "stack_trace": ""}
    record = StepRecord(EventType.STEP_FAILED, attempt=1, failure=failure)
    await db.journal.record(call(lease, 3), record)
    page = await load(api(db), Lease(lease.workflow_id, 2, ""))
    async with db.pool.connection() as conn:
        row = await fetch_one(conn, SUMMED, [lease.workflow_id])
    assert row is not None
    assert page.history_bytes == row["bytes"] > 3000
    assert page.history_length == row["events"] == 6


async def test_history_bytes_counts_what_the_platform_appends(db: Db) -> None:
    workflow_id = run_id()
    await db.journal.start(workflow_id, "flow", "q", json_payload('"in"'), execution_timeout=0)
    await db.journal.cancel(workflow_id, "enough", "")
    while await expire_runs(db.pool) == EXPIRE_BATCH:  # other tests' runs have no deadline
        pass
    async with db.pool.connection() as conn:
        counted = await fetch_one(
            conn,
            "SELECT history_bytes FROM history.workflows WHERE workflow_id = %s",
            [workflow_id],
        )
        summed = await fetch_one(conn, SUMMED, [workflow_id])
    assert counted is not None and summed is not None and summed["events"] == 3
    assert counted["history_bytes"] == summed["bytes"]


# What history_bytes counts, summed over the journal (the migration's backfill).
SUMMED = f"""
SELECT count(*) AS events,
       sum({store.EVENT_BYTES} + COALESCE(octet_length(COALESCE(e.payload, p.data)), 0)
           + COALESCE(octet_length(e.failure::text), 0)) AS bytes
FROM history.events e LEFT JOIN history.payloads p ON p.sha256 = e.payload_sha256
WHERE e.workflow_id = %s
"""


async def test_later_pages_sent_as_loads_by_an_older_worker_count_as_no_new_load(db: Db) -> None:
    handlers = api(db, page_bytes=1)
    lease = await recorded(db, 2)
    for fence in (2, 3):
        held = Lease(lease.workflow_id, fence, "")
        page = await load(handlers, held)
        while page.more:  # each page a load again, under the same fence
            page = await load(handlers, held, page.events[-1].event_id)
    async with db.pool.connection() as conn:
        row = await fetch_one(
            conn,
            "SELECT idle_loads FROM history.workflows WHERE workflow_id = %s",
            [lease.workflow_id],
        )
    assert row == {"idle_loads": 2}


async def test_a_sticky_resume_is_a_load_and_reads_no_page_under_the_old_fence_first(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept run resumed under a new lease loads after its position at once: reading a page
    under the fence first cost a statement (over a millisecond) that always found the new fence
    unloaded."""
    handlers = api(db)
    lease = await recorded(db, 2)
    journal = handlers._journal
    page_reads: list[int] = []
    next_page = journal.next_page

    async def counted(held: Lease, after_event_id: int) -> Loaded | None:
        page_reads.append(after_event_id)
        return await next_page(held, after_event_id)

    monkeypatch.setattr(journal, "next_page", counted)
    resumed = await load(handlers, Lease(lease.workflow_id, 5, ""), after=2)
    assert resumed.workflow.fence == 5 and [e.event_id for e in resumed.events] == [3]
    assert page_reads == []
    # A later page does read under the fence (and counts as no new load).
    await load(handlers, Lease(lease.workflow_id, 5, ""), after=1, later_page=True)
    assert page_reads == [1]


async def test_a_later_page_needs_the_event_it_follows(db: Db) -> None:
    lease = await recorded(db, 1)
    error = await refusal(load(api(db), lease, later_page=True))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "later_page needs after_event_id" in error.message
