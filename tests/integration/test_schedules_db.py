"""Schedules on the Journal against a real PostgreSQL: slots fire runs whose ids come from the
slot, one run per slot even with two journals firing side by side; slots older than the
catch-up window are counted as missed; each overlap policy with a run that stays open (no worker
runs here, so every run stays open until the test closes it). Downtime is made by moving a
schedule's next slot into the past, so nothing here waits on a clock but the 1 s interval."""

from __future__ import annotations

import asyncio
import itertools
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common.db import open_pool
from perdure.common.payload import json_payload
from perdure.history.journal import Journal
from perdure.history.rows import fetch_one
from perdure.history.schedules import LOCK_SCHEDULE, run_workflow_id
from tests.integration.journal_db import Db, db, journal_dsn

__all__ = ["db", "journal_dsn"]  # the fixtures

DEADLINE = 60.0  # seconds a condition may take to hold (generous: a shared machine)
# The overlap tests' slots are hours apart, from a whole hour: no new slot comes mid-test.
HOUR = 3600
TEN_DAYS = 10 * 24 * 3600.0


def schedule(
    policy: int = spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, interval: int = 1
) -> spb.Schedule:
    made = spb.Schedule(
        schedule_id=f"s-{uuid.uuid4().hex[:8]}",
        action=api.StartWorkflowRequest(
            workflow_type="flow", task_queue="q", input=json_payload('"tick"')
        ),
        overlap_policy=policy,  # type: ignore[arg-type]
    )
    made.spec.interval.FromSeconds(interval)
    return made


async def slots_started(pool: AsyncConnectionPool, schedule_id: str) -> list[tuple[str, int]]:
    """Every run whose id is one of the schedule's slots: (workflow id, runs with that id)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT chain_id, count(*) FROM history.workflows WHERE chain_id LIKE %s "
            "GROUP BY chain_id ORDER BY chain_id",
            [f"{schedule_id}-%"],
        )
        return [(str(row[0]), int(row[1])) for row in await cur.fetchall()]


async def back_in_time(
    pool: AsyncConnectionPool, schedule_id: str, seconds: int, unit: str = "second"
) -> datetime:
    """Make the schedule's next slot `seconds` before the start of this `unit` (second, hour),
    as if no replica had fired it since: the slot."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "UPDATE history.schedules "
            "SET next_fire = date_trunc(%s, now()) - make_interval(secs => %s) "
            "WHERE schedule_id = %s RETURNING next_fire",
            [unit, seconds, schedule_id],
        )
        row = await cur.fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]


async def info(db: Db, schedule_id: str) -> spb.ScheduleInfo:
    return await db.journal.describe_schedule("default", schedule_id)


@pytest.fixture
async def second_journal(journal_dsn: str) -> AsyncIterator[Journal]:
    """Another replica's journal on the same database."""
    pool = await open_pool(journal_dsn, max_size=4)
    try:
        yield Journal(pool, lambda: None, crash_loop_limit=3)
    finally:
        await pool.close()


async def test_an_interval_fires_one_run_per_slot_with_two_replicas(
    db: Db, second_journal: Journal
) -> None:
    made = schedule()
    await db.journal.create_schedule("default", made, 60.0)
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while len(await slots_started(db.pool, made.schedule_id)) < 4:
        assert asyncio.get_running_loop().time() < deadline, "no slot fired"
        await asyncio.gather(db.journal.fire_due_schedules(), second_journal.fire_due_schedules())
        await asyncio.sleep(0.05)
    runs = await slots_started(db.pool, made.schedule_id)
    assert all(count == 1 for _, count in runs)
    slots = [datetime.fromisoformat(wid.split(f"{made.schedule_id}-")[1]) for wid, _ in runs]
    assert [b - a for a, b in itertools.pairwise(slots)] == [timedelta(seconds=1)] * (
        len(slots) - 1
    ), "a slot between the first and the last is missing"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", wid[-20:]) for wid, _ in runs)
    described = await info(db, made.schedule_id)
    assert described.action_count >= len(runs) and described.skipped_count == 0
    assert {a.workflow_id for a in described.recent_actions} <= {wid for wid, _ in runs}


async def test_slots_older_than_the_catch_up_window_are_missed_the_others_start_once(
    db: Db,
) -> None:
    made = schedule()
    await db.journal.create_schedule("default", made, 5.0)
    first = await back_in_time(db.pool, made.schedule_id, 20)
    await db.journal.fire_due_schedules()
    described = await info(db, made.schedule_id)
    runs = await slots_started(db.pool, made.schedule_id)
    # 20 s of slots: those at least 5 s old are missed, the 5 or so within it start, once each.
    assert described.missed_count >= 14
    assert len(runs) >= 4 and all(count == 1 for _, count in runs)
    oldest = run_workflow_id(made.schedule_id, first + timedelta(seconds=described.missed_count))
    assert runs[0][0] == oldest
    assert described.missed_count + len(runs) >= 20


async def test_skip_starts_nothing_while_the_last_run_is_open(db: Db) -> None:
    made = schedule(spb.SCHEDULE_OVERLAP_POLICY_SKIP, HOUR)
    await db.journal.create_schedule("default", made, TEN_DAYS)
    await back_in_time(db.pool, made.schedule_id, 4 * HOUR, "hour")
    await db.journal.fire_due_schedules()
    described = await info(db, made.schedule_id)
    assert len(await slots_started(db.pool, made.schedule_id)) == 1
    assert described.action_count == 1 and described.skipped_count >= 3


async def test_buffer_one_starts_one_slot_once_the_open_run_closes(db: Db) -> None:
    made = schedule(spb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, HOUR)
    await db.journal.create_schedule("default", made, TEN_DAYS)
    await back_in_time(db.pool, made.schedule_id, 4 * HOUR, "hour")
    await db.journal.fire_due_schedules()
    described = await info(db, made.schedule_id)
    (first, _), *more = await slots_started(db.pool, made.schedule_id)
    assert not more and described.HasField("buffered_slot_time")
    assert described.skipped_count >= 2  # one waits, the others are skipped
    await db.journal.terminate(first, "done", "")
    await db.journal.fire_due_schedules()
    runs = await slots_started(db.pool, made.schedule_id)
    buffered = described.buffered_slot_time.ToDatetime(tzinfo=UTC)
    assert runs[1][0] == run_workflow_id(made.schedule_id, buffered)
    assert not (await info(db, made.schedule_id)).HasField("buffered_slot_time")


async def test_allow_all_starts_every_slot(db: Db) -> None:
    made = schedule(spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL, HOUR)
    await db.journal.create_schedule("default", made, TEN_DAYS)
    await back_in_time(db.pool, made.schedule_id, 4 * HOUR, "hour")
    await db.journal.fire_due_schedules()
    assert len(await slots_started(db.pool, made.schedule_id)) >= 5


async def test_cancel_other_asks_the_open_run_to_cancel(db: Db) -> None:
    made = schedule(spb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER, HOUR)
    await db.journal.create_schedule("default", made, TEN_DAYS)
    await back_in_time(db.pool, made.schedule_id, 1 * HOUR, "hour")
    await db.journal.fire_due_schedules()
    (first, _), *more = await slots_started(db.pool, made.schedule_id)
    assert not more
    described = await db.journal.describe(first)
    assert described.info.cancel_requested
    assert (await info(db, made.schedule_id)).HasField("buffered_slot_time")


async def test_a_paused_schedule_skips_its_slots_and_a_trigger_still_starts(db: Db) -> None:
    made = schedule()
    made.paused, made.note = True, "maintenance"
    await db.journal.create_schedule("default", made, 60.0)
    await back_in_time(db.pool, made.schedule_id, 3)
    await db.journal.fire_due_schedules()
    assert await slots_started(db.pool, made.schedule_id) == []
    assert (await info(db, made.schedule_id)).skipped_count >= 3
    action = await db.journal.trigger_schedule("default", made.schedule_id)
    assert action.triggered and action.workflow_id.startswith(f"{made.schedule_id}-")
    assert len(await slots_started(db.pool, made.schedule_id)) == 1
    await db.journal.set_paused("default", made.schedule_id, False, "")
    assert not (await info(db, made.schedule_id)).schedule.paused


async def test_deleting_a_schedule_leaves_its_runs(db: Db) -> None:
    made = schedule()
    await db.journal.create_schedule("default", made, 60.0)
    await db.journal.trigger_schedule("default", made.schedule_id)
    await db.journal.delete_schedule("default", made.schedule_id)
    assert len(await slots_started(db.pool, made.schedule_id)) == 1
    with pytest.raises(Exception, match="no schedule"):
        await info(db, made.schedule_id)


async def test_a_replica_that_dies_before_its_commit_leaves_the_slot_to_the_next_one(
    db: Db, second_journal: Journal
) -> None:
    made = schedule()
    await db.journal.create_schedule("default", made, 60.0)
    slot = await back_in_time(db.pool, made.schedule_id, 0)
    async with db.pool.connection() as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                row = await fetch_one(conn, LOCK_SCHEDULE, ["default", made.schedule_id])
                assert row is not None
                now = (await fetch_one(conn, "SELECT now() AS now", ()))["now"]  # type: ignore[index]
                await db.journal._fire(conn, row | {"db_now": now, "last_open": False}, [])
                # Meanwhile another replica passes the locked schedule by, starting nothing.
                await second_journal.fire_due_schedules()
                assert await slots_started(db.pool, made.schedule_id) == []
                raise RuntimeError("killed before the commit")
    # The start and the schedule's advance were undone together: the next replica starts the
    # slot, once.
    await second_journal.fire_due_schedules()
    runs = await slots_started(db.pool, made.schedule_id)
    assert runs[0] == (run_workflow_id(made.schedule_id, slot), 1)
    assert all(count == 1 for _, count in runs)
