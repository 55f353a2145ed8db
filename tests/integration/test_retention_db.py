"""Retention passes on the history Journal against a real PostgreSQL, one fresh database per
test, partitions of one second: runs start whatever partitions exist, the archive sees the runs
before anything of them is deleted (and a failing archive deletes nothing), a partition an open
run holds loses its expired runs one by one and drops once the run is gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
from psycopg import AsyncConnection

from perdure.common.db import open_pool
from perdure.common.payload import json_payload
from perdure.history import partitions
from perdure.history.journal import Journal
from perdure.history.model import Lease, Outcome
from perdure.history.retention import Retention, RetentionSettings
from perdure.history.rows import fetch_all, fetch_one
from tests.fixtures.postgres import fresh_database
from tests.integration.journal_db import Db, Wakes, _migrate, run_id

WAIT = 30.0
SETTINGS = RetentionSettings(retention=0.001, stream_retention=3600.0, partition_seconds=1)


@pytest.fixture
def fresh_dsn(server_dsn: str) -> Iterator[str]:
    with fresh_database(server_dsn) as dsn:
        asyncio.run(_migrate(dsn))
        yield dsn


@pytest.fixture
async def db(fresh_dsn: str) -> AsyncIterator[Db]:
    pool = await open_pool(fresh_dsn, max_size=4)
    wakes = Wakes()
    try:
        yield Db(Journal(pool, wakes, crash_loop_limit=3), pool, wakes)
    finally:
        await pool.close()


async def rows(db: Db, statement: str, *params: object) -> list[dict[str, object]]:
    async with db.pool.connection() as conn:
        return await fetch_all(conn, statement, params)


async def start(db: Db) -> Lease:
    workflow_id = run_id()
    await db.journal.start(workflow_id, "flow", "q", json_payload('"in"'))
    lease = Lease(workflow_id, 1, "")
    await db.journal.load(lease)
    return lease


async def part_of(db: Db, lease: Lease) -> int:
    found = await rows(
        db, "SELECT part FROM history.workflows WHERE workflow_id = %s", lease.workflow_id
    )
    return int(str(found[0]["part"])) if found else -1


async def partition_of_events(db: Db, lease: Lease) -> set[str]:
    found = await rows(
        db,
        "SELECT DISTINCT tableoid::regclass::text AS t FROM history.events WHERE workflow_id = %s",
        lease.workflow_id,
    )
    return {str(row["t"]) for row in found}


async def attached(db: Db) -> set[str]:
    found = await rows(
        db,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'history.events'::regclass",
    )
    return {str(row["relname"]) for row in found}


async def current_part(db: Db) -> int:
    return int(str((await rows(db, "SELECT history.current_part() AS p"))[0]["p"]))


async def past(db: Db, part: int) -> None:
    """Wait until runs start in a partition after `part` (partitions of one second)."""
    async with db.pool.connection() as conn:
        await partitions.ensure_ahead(conn, SETTINGS.partition_seconds)
    for _ in range(int(WAIT * 10)):
        if await current_part(db) > part:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no partition after {part} began")


async def finish(db: Db, lease: Lease) -> None:
    await db.journal.finish(lease, Outcome.RESULT, json_payload('"done"'))


async def test_a_run_starts_when_the_partitions_are_behind_the_clock(db: Db) -> None:
    # Only the migration's partition exists, its range over: a start takes it all the same.
    upto = await rows(db, "SELECT hi FROM history.journal_partitions")
    assert len(upto) == 1
    behind = await start(db)
    assert await part_of(db, behind) == 0
    assert await partition_of_events(db, behind) == {"history.events_0"}
    # The maintenance creates the missing ranges; the next run takes the newest begun.
    async with db.pool.connection() as conn:
        assert await partitions.ensure_ahead(conn, 1) >= 1
    await past(db, 0)
    later = await start(db)
    lo = await part_of(db, later)
    assert lo > 0 and await partition_of_events(db, later) == {f"history.events_{lo}"}


async def test_a_failing_archive_deletes_nothing_and_a_working_one_sees_the_runs_first(
    db: Db,
) -> None:
    await past(db, 0)
    closed = await start(db)
    await finish(db, closed)
    lo = await part_of(db, closed)
    await past(db, lo)

    async def failing(conn: AsyncConnection, keys: Sequence[str]) -> None:
        raise RuntimeError("the archive is down")

    with pytest.raises(RuntimeError):
        await Retention(db.pool, SETTINGS, failing).run_pass()
    assert await part_of(db, closed) == lo and f"events_{lo}" in await attached(db)

    seen: dict[str, int] = {}

    async def archive(conn: AsyncConnection, keys: Sequence[str]) -> None:
        for key in keys:
            row = await fetch_one(
                conn, "SELECT count(*) AS n FROM history.events WHERE workflow_id = %s", [key]
            )
            seen[key] = int(row["n"]) if row else 0

    await Retention(db.pool, SETTINGS, archive).run_pass()
    assert seen == {closed.workflow_id: 2}  # started and completed, still there
    assert await part_of(db, closed) == -1
    assert f"events_{lo}" not in await attached(db)
    assert not await rows(db, "SELECT 1 FROM history.journal_partitions WHERE lo = %s", lo)


async def test_an_open_run_holds_its_partition_whose_expired_runs_go_one_by_one(db: Db) -> None:
    await past(db, 0)
    for _ in range(20):  # an open and a closed run in one partition
        open_run, closed = await start(db), await start(db)
        if await part_of(db, open_run) == await part_of(db, closed):
            break
        await finish(db, open_run)
    lo = await part_of(db, open_run)
    await finish(db, closed)
    await past(db, lo)
    archived: list[str] = []

    async def archive(conn: AsyncConnection, keys: Sequence[str]) -> None:
        archived.extend(keys)

    retention = Retention(db.pool, SETTINGS, archive)
    await retention.run_pass()
    assert archived == [closed.workflow_id]
    assert await part_of(db, closed) == -1 and await part_of(db, open_run) == lo
    assert f"events_{lo}" in await attached(db)
    assert len(await partition_of_events(db, open_run)) == 1

    await finish(db, open_run)  # the run goes on and closes; then its partition drops
    await retention.run_pass()
    assert open_run.workflow_id in archived
    assert await part_of(db, open_run) == -1
    assert f"events_{lo}" not in await attached(db)


async def test_a_drop_cut_short_after_the_detach_is_finished_by_the_next_pass(db: Db) -> None:
    await past(db, 0)
    closed = await start(db)
    await finish(db, closed)
    lo = await part_of(db, closed)
    await past(db, lo)
    # What a pass leaves when its process dies right after the detach committed.
    async with db.pool.connection() as conn, conn.transaction():
        await conn.execute("DELETE FROM history.signal_consumptions WHERE part = %s", [lo])
        await partitions.detach(conn, lo)
        await conn.execute(
            "UPDATE history.journal_partitions SET dropped = true WHERE lo = %s", [lo]
        )
    assert f"events_{lo}" not in await attached(db)
    assert await rows(db, "SELECT 1 FROM pg_class WHERE relname = %s", f"events_{lo}")
    assert await current_part(db) > lo  # a dropped partition is never a run's

    await Retention(db.pool, SETTINGS).run_pass()
    assert not await rows(db, "SELECT 1 FROM pg_class WHERE relname = %s", f"events_{lo}")
    assert await part_of(db, closed) == -1
    assert not await rows(db, "SELECT 1 FROM history.journal_partitions WHERE lo = %s", lo)
