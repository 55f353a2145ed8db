"""The commit feed on a real PostgreSQL: a run's commits wake the watchers of everything it
commits, and only its status changes wake a caller waiting for its result; the process that
commits wakes its own watchers without waiting for the notification."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from perdure.common.payload import json_payload
from perdure.history import convert
from perdure.history.commit_feed import CommitFeed
from perdure.history.journal import Journal
from perdure.history.model import EventType, Outcome, StepRecord
from tests.integration.journal_db import Db, call, db, journal_dsn, started

__all__ = ["db", "journal_dsn"]  # the fixtures

WAKE_TIMEOUT = 30.0  # seconds: generous, a notification arrives in a few milliseconds


@contextlib.asynccontextmanager
async def listening(dsn: str) -> AsyncIterator[CommitFeed]:
    """A commit feed LISTENing on the database, stopped at the end."""
    feed = CommitFeed(dsn)
    feed.start()
    try:
        await asyncio.wait_for(feed.connected.wait(), WAKE_TIMEOUT)
        yield feed
    finally:
        await feed.stop()


async def test_a_runs_steps_wake_its_watchers_and_only_its_close_wakes_its_result_waiter(
    db: Db, journal_dsn: str
) -> None:
    async with listening(journal_dsn) as feed:
        lease = await started(db.journal)
        key = lease.workflow_id  # the default namespace's key is the workflow id
        async with feed.watch(key) as everything, feed.watch(key, status_only=True) as result:
            step = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload("1"))
            await db.journal.record(call(lease, 0), step)
            # Both watchers are woken by the same notification, if at all: the step's.
            await asyncio.wait_for(everything._event.wait(), WAKE_TIMEOUT)
            assert not result._event.is_set(), "a step woke the caller waiting for the result"

            await db.journal.finish(lease, Outcome.RESULT, json_payload('"done"'))
            await asyncio.wait_for(result._event.wait(), WAKE_TIMEOUT)


async def test_a_commit_wakes_this_processs_watchers_before_any_notification(
    db: Db, journal_dsn: str
) -> None:
    # No LISTEN connection here (the feed is not started): only the Journal's own wake-up
    # after each commit can wake the watchers.
    feed = CommitFeed(journal_dsn)
    journal = Journal(db.pool, db.wakes, on_committed=feed.committed)
    lease = await started(journal)
    key = lease.workflow_id
    async with (
        feed.watch(key) as everything,
        feed.watch(key, status_only=True) as result,
        feed.watch(key, stream="output") as reader,
        feed.watch(key, stream="other") as other_reader,
    ):
        step = StepRecord(EventType.STEP_COMPLETED, attempt=1, payload=json_payload("1"))
        await journal.record(call(lease, 0), step)
        assert everything._event.is_set() and not result._event.is_set()
        assert reader.handed_after(0) is None  # woken by an event: it reads
        everything._event.clear()
        reader._event.clear()

        started_attempt = StepRecord(EventType.STEP_ATTEMPT_STARTED, positioned=False, attempt=1)
        await journal.record(call(lease, 1), started_attempt)
        for watch in (everything, reader, other_reader):
            watch._event.clear()
        reader.handed_after(0)
        chunks = [json_payload('"a"'), json_payload('"b"')]
        await journal.emit(lease, "step-1", 1, "output", 0, chunks)
        # The frames go to the stream's reader as they were stored, and wake nobody else.
        assert reader._event.is_set() and not everything._event.is_set()
        assert not other_reader._event.is_set() and not result._event.is_set()
        reader._event.clear()
        handed = reader.handed_after(0)
        _, stored = await journal.frames_page(
            (await journal.find_run(key, ""))["run_id"], "output", 0
        )
        assert handed == stored and [frame.seq for frame in stored] == [1, 2]
        # A batch sent again stores nothing and hands nothing.
        await journal.emit(lease, "step-1", 1, "output", 0, chunks)
        assert not reader._event.is_set()

        await journal.finish(lease, Outcome.RESULT, json_payload('"done"'))
        assert everything._event.is_set() and result._event.is_set()
        assert reader.handed_after(2) is None  # the close makes the reader read


async def test_a_close_hands_the_closed_run_to_a_caller_waiting_for_it_here(
    db: Db, journal_dsn: str
) -> None:
    # No LISTEN connection: only the close's own hand-off can reach the waiter.
    feed = CommitFeed(journal_dsn)
    journal = Journal(db.pool, db.wakes, on_committed=feed.committed, awaited=feed.awaited)
    for waiting in (True, False):
        lease = await started(journal)
        key = lease.workflow_id
        run_id = (await journal.find_run(key, ""))["run_id"]
        async with feed.watch(key, status_only=waiting) as watch:
            assert feed.awaited(key) == waiting
            await journal.finish(lease, Outcome.RESULT, json_payload('"done"'))
            assert watch._event.is_set()
            handed = watch.closed_run(run_id)
        read = await journal.run_by_id(run_id)
        if not waiting:  # a watcher of everything a run commits is woken, and reads
            assert handed is None
            continue
        assert handed is not None and {column: handed[column] for column in read} == read
        assert convert.workflow_info(handed) == convert.workflow_info(read)
        assert watch.closed_run(run_id) is None  # handed once


async def test_a_dropped_listen_connection_wakes_every_watcher_and_listens_again(
    db: Db, journal_dsn: str
) -> None:
    async with listening(journal_dsn) as feed:
        lease = await started(db.journal)
        async with feed.watch(lease.workflow_id, status_only=True) as result:
            # The feed's connection is cut, as a failover or a proxy would cut it.
            async with db.pool.connection() as conn:
                await conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND query LIKE 'LISTEN perdure_run%'"
                )
            # Woken, to re-read whatever was committed while nobody listened ...
            await asyncio.wait_for(result._event.wait(), WAKE_TIMEOUT)
            # ... and listening again, on both channels: the close's notification wakes it.
            await asyncio.wait_for(feed.connected.wait(), WAKE_TIMEOUT)
            result._event.clear()
            await db.journal.finish(lease, Outcome.RESULT, json_payload('"done"'))
            await asyncio.wait_for(result._event.wait(), WAKE_TIMEOUT)
