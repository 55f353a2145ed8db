"""The services' pool against a primary whose synchronous standby is stopped (SIGSTOP): a
commit whose wait for the standby is cancelled (the caller's task cancelled, an operator's
pg_cancel_backend) is committed on the primary alone, and PostgreSQL reports it done. The pool
turns it into UnconfirmedCommit, drops the connection, and lets nobody read or write until the
standby confirms again; then a failover keeps it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.replication import UnconfirmedCommit
from tests.fixtures.replicated_postgres import ReplicatedPostgres, replicated_pair

WAITING = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"


@pytest.fixture
def pair() -> Iterator[ReplicatedPostgres]:
    """A primary and a synchronous standby of this test's own."""
    with replicated_pair() as servers:
        yield servers


@pytest.fixture
async def pool(pair: ReplicatedPostgres) -> AsyncIterator[AsyncConnectionPool]:
    opened = await open_pool(pair.url(), max_size=3)
    async with opened.connection() as conn:
        await conn.execute("CREATE TABLE marks (name text PRIMARY KEY)")
    try:
        yield opened
    finally:
        await opened.close()


async def _mark(pool: AsyncConnectionPool, name: str) -> str:
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO marks VALUES (%s) ON CONFLICT DO NOTHING", [name])
    return "ok"


async def _waiting(pair: ReplicatedPostgres, count: int = 1) -> None:
    """Until `count` commits wait for the standby."""
    async with await psycopg.AsyncConnection.connect(pair.primary.dsn(), autocommit=True) as c:
        deadline = time.monotonic() + 30
        while (await (await c.execute(WAITING)).fetchone())[0] < count:  # type: ignore[index]
            assert time.monotonic() < deadline, "no commit waits for the standby"
            await asyncio.sleep(0.05)


async def test_a_cancelled_wait_for_the_standby_is_never_a_success(
    pair: ReplicatedPostgres, pool: AsyncConnectionPool
) -> None:
    other = await open_pool(pair.url(), max_size=1)  # a second process's pool, say
    pair.pause_standby()
    try:
        # An operator cancels the wait: committed on the primary, reported as done by it, an
        # error here.
        cancelled = asyncio.create_task(_mark(pool, "cancelled"))
        await _waiting(pair)
        async with await psycopg.AsyncConnection.connect(pair.primary.dsn(), autocommit=True) as c:
            await c.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
            )
        with pytest.raises(UnconfirmedCommit, match="not confirmed by the synchronous standby"):
            await cancelled
        # The caller gives up (a gRPC deadline cancels the handler's task): it sees that.
        given_up = asyncio.create_task(_mark(other, "given-up"))
        await _waiting(pair)
        given_up.cancel()
        with pytest.raises(asyncio.CancelledError):
            await given_up
        # Both rows are on the primary; nobody may see them (and answer a retry as done) until
        # the standby has them too: the next caller of either pool waits for its confirmation.
        retried = asyncio.create_task(_mark(pool, "cancelled"))
        after = asyncio.create_task(_mark(other, "after"))
        await asyncio.sleep(1.0)
        assert not retried.done() and not after.done()
    finally:
        pair.resume_standby()
    assert await asyncio.wait_for(retried, 30) == "ok"
    assert await asyncio.wait_for(after, 30) == "ok"
    await other.close()

    pair.kill_primary()
    pair.promote()
    async with await psycopg.AsyncConnection.connect(pair.url(), autocommit=True) as c:
        assert c.info.port == pair.standby.port
        rows = await (await c.execute("SELECT name FROM marks ORDER BY name")).fetchall()
    assert rows == [("after",), ("cancelled",), ("given-up",)]
