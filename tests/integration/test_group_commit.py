"""History's group commit against a real PostgreSQL: records arriving together are written in
one statement, each gets the answer it would get alone, and one bad record spoils no other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.errors import UniqueViolation
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.migrate import apply_migrations
from perdure.common.payload import json_payload
from perdure.history import store
from perdure.history.group_commit import GroupCommit


@pytest.fixture
async def pool(database_dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    async with await psycopg.AsyncConnection.connect(database_dsn, autocommit=True) as conn:
        await apply_migrations(conn, "history", "perdure.history")
        for run in ("a", "b", "c", "closed"):
            await conn.execute(
                "INSERT INTO history.workflows (workflow_id, chain_id, workflow_type, task_queue,"
                " status, input, event_count, fence)"
                " VALUES (%s, %s, 'flow', 'q', %s, 'null', 1, 2)",
                [run, run, "COMPLETED" if run == "closed" else "RUNNING"],
            )
    pool = await open_pool(database_dsn, max_size=4)
    try:
        yield pool
    finally:
        await pool.close()


def record(run: str, step_id: str, position: int, fence: int = 2, **fields: Any) -> dict[str, Any]:
    return store.event_params(
        workflow_id=run,
        fence=fence,
        event_type=fields.pop("event_type", "STEP_COMPLETED"),
        step_id=step_id,
        step_name=step_id,
        position=position,
        attempt=1,
        **fields,
    )


async def events(pool: AsyncConnectionPool) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT workflow_id, event_id, step_id, payload, consumed FROM history.events"
            " ORDER BY workflow_id, event_id"
        )
        return await cursor.fetchall()


async def transactions(pool: AsyncConnectionPool) -> dict[tuple[str, str], str]:
    """The transaction that wrote each run's step."""
    async with pool.connection() as conn:
        cursor = await conn.execute("SELECT workflow_id, step_id, xmin::text FROM history.events")
        return {(run, step): xid for run, step, xid in await cursor.fetchall()}


async def test_records_arriving_together_share_one_commit(pool: AsyncConnectionPool) -> None:
    group = GroupCommit(pool)
    first = asyncio.create_task(group.append(record("a", "s1", 0, payload=json_payload("1"))))
    await asyncio.sleep(0)  # the first goes alone; the next three arrive while it is written
    rest = [
        group.append(record("b", "s1", 0, payload=json_payload('{"x": [1, 2]}'))),
        group.append(record("c", "w", 0, event_type="SIGNAL_CONSUMED", consumed=[3, 4])),
        group.append(record("a", "s2", 1, payload=None)),
        group.append(
            record("a", "s3", 2, payload=json_payload("3"))
        ),  # the same run again: the same statement, numbered in order
    ]
    rows = [await first, *await asyncio.gather(*rest)]
    assert [(r["event_id"], r["cancel_requested"]) for r in rows if r] == [
        (2, False),
        (2, False),
        (2, False),
        (3, False),
        (4, False),
    ]
    assert await events(pool) == [
        ("a", 2, "s1", b"1", None),
        ("a", 3, "s2", b"null", None),  # a step that returned None: JSON null
        ("a", 4, "s3", b"3", None),
        ("b", 2, "s1", b'{"x": [1, 2]}', None),  # the bytes as written
        ("c", 2, "w", b"null", [3, 4]),
    ]
    written = await transactions(pool)
    # Alone at an idle journal; then together, two records of one run included.
    assert written[("b", "s1")] == written[("c", "w")] == written[("a", "s2")]
    assert written[("a", "s2")] == written[("a", "s3")] != written[("a", "s1")]
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT event_count, history_bytes FROM history.workflows WHERE workflow_id = 'a'"
        )
        # WORKFLOW_STARTED (the fixture's 1) and three records of 64 bytes and their payloads.
        assert await cursor.fetchone() == (4, 3 * store.EVENT_BYTES + len(b"1null3"))


async def test_one_runs_records_under_two_leases_in_one_batch(pool: AsyncConnectionPool) -> None:
    group = GroupCommit(pool)
    first = asyncio.create_task(group.append(record("b", "s0", 0)))
    await asyncio.sleep(0)  # the next ones arrive while it is written: one batch
    rows = [
        await first,
        *await asyncio.gather(
            group.append(record("a", "s1", 0)),
            group.append(record("a", "s2", 1, fence=1)),  # an earlier lease's late record
            group.append(record("a", "s3", 2)),
        ),
    ]
    assert [row["event_id"] if row else None for row in rows] == [2, 2, None, 3]
    written = await transactions(pool)
    assert written[("a", "s1")] == written[("a", "s3")]
    assert [(run, event, step) for run, event, step, _, _ in await events(pool)] == [
        ("a", 2, "s1"),
        ("a", 3, "s3"),
        ("b", 2, "s0"),
    ]


async def test_a_stale_or_closed_record_gets_no_row_and_spoils_nothing(
    pool: AsyncConnectionPool,
) -> None:
    group = GroupCommit(pool)
    rows = await asyncio.gather(
        group.append(record("a", "s1", 0)),
        group.append(record("b", "s1", 0, fence=1)),  # stale
        group.append(record("closed", "s1", 0)),
        group.append(record("c", "t", 0, event_type="TIMER_STARTED", due_in=5.0)),
    )
    assert [row is not None for row in rows] == [True, False, False, True]
    assert rows[3] is not None and rows[3]["due_at"] is not None
    assert [(run, step) for run, _, step, _, _ in await events(pool)] == [("a", "s1"), ("c", "t")]


async def test_a_conflicting_record_fails_alone(pool: AsyncConnectionPool) -> None:
    group = GroupCommit(pool)
    await group.append(record("a", "s1", 0, payload=json_payload("1")))
    results = await asyncio.gather(
        group.append(record("b", "s1", 0)),
        group.append(
            record("a", "s1", 0, payload=json_payload("2"))
        ),  # step s1 is recorded already
        group.append(record("c", "s1", 0)),
        return_exceptions=True,
    )
    assert isinstance(results[1], UniqueViolation)
    assert all(isinstance(r, dict) and r["event_id"] == 2 for r in (results[0], results[2]))
    assert [(run, step) for run, _, step, _, _ in await events(pool)] == [
        ("a", "s1"),
        ("b", "s1"),
        ("c", "s1"),
    ]


async def test_a_conflict_in_a_large_batch_costs_a_few_statements_not_one_per_record(
    pool: AsyncConnectionPool,
) -> None:
    runs = [f"r{i}" for i in range(64)]
    async with pool.connection() as conn:
        for run in runs:
            await conn.execute(
                "INSERT INTO history.workflows (workflow_id, chain_id, workflow_type, task_queue,"
                " status, input, event_count, fence)"
                " VALUES (%s, %s, 'flow', 'q', 'RUNNING', 'null', 1, 2)",
                [run, run],
            )
    group = GroupCommit(pool)
    await group.append(record("r40", "s1", 0, payload=json_payload("1")))
    results = await asyncio.gather(
        *(
            group.append(record(run, "s1", 0, payload=json_payload("2"))) for run in runs
        ),  # one batch
        return_exceptions=True,
    )
    assert isinstance(results[40], UniqueViolation)  # step s1 of r40 is recorded already
    good = [r for i, r in enumerate(results) if i != 40]
    assert all(isinstance(r, dict) and r["event_id"] == 2 for r in good)
    written = await transactions(pool)
    # Halved until the conflict is alone: one commit per half that holds no conflict
    # (6 of them for 64 records), instead of 63 records written one by one.
    commits = {written[(run, "s1")] for run in runs if run != "r40"}
    assert len(commits) <= 6


async def _record_plans(database_dsn: str, *, generic_plans: bool) -> tuple[int, int]:
    """Twelve records written one at a time on a one-connection pool: how often the record
    statement, once prepared, ran on its cached generic plan and how often on a plan made for
    that very execution (generic, custom)."""
    pool = await open_pool(database_dsn, max_size=1, generic_plans=generic_plans)
    try:
        group = GroupCommit(pool)
        first = 100 if generic_plans else 0  # positions of run b not taken yet
        for position in range(first, first + 12):
            await group.append(record("b", f"plan-{position}", position))
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%%WITH ORDINALITY%%'",
                prepare=False,  # prepared, this query would be among those it finds
            )
            rows = await cursor.fetchall()
    finally:
        await pool.close()
    assert len(rows) == 1, rows  # psycopg prepared the record statement
    return rows[0][0], rows[0][1]


async def test_the_records_pool_plans_the_record_statement_once(
    pool: AsyncConnectionPool, database_dsn: str
) -> None:
    # PostgreSQL re-plans the record statement at every execution on an ordinary connection
    # (it estimates the generic plan of a statement over unnest'ed arrays dearer), and
    # planning it costs more than running it: history's records pool plans it once.
    generic, custom = await _record_plans(database_dsn, generic_plans=False)
    assert custom >= 5  # PostgreSQL's rule: at least the first five prepared executions
    generic, custom = await _record_plans(database_dsn, generic_plans=True)
    assert custom == 0 and generic == 12  # prepared from its first execution (PREPARE_THRESHOLD)
