"""The history Journal in the test process against a real PostgreSQL: one database per test
module, migrated with history's own migrations; no scheduler or gateway (the Journal talks to
neither: its one way out, the outbox relay's wake-up, is counted here)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.errors import ApiError
from perdure.common.migrate import apply_migrations
from perdure.common.payload import json_payload
from perdure.history.journal import Journal
from perdure.history.model import Call, Lease
from tests.fixtures.postgres import fresh_database


@dataclass
class Wakes:
    """The outbox relay's wake-ups the Journal asked for."""

    count: int = 0

    def __call__(self) -> None:
        self.count += 1


@dataclass
class Db:
    journal: Journal
    pool: AsyncConnectionPool
    wakes: Wakes


async def _migrate(dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await apply_migrations(conn, "history", "perdure.history")


@pytest.fixture(scope="module")
def journal_dsn(server_dsn: str) -> Iterator[str]:
    """A database migrated for history, shared by a module's tests (each uses its own runs)."""
    with fresh_database(server_dsn) as dsn:
        asyncio.run(_migrate(dsn))
        yield dsn


@pytest.fixture
async def db(journal_dsn: str) -> AsyncIterator[Db]:
    pool = await open_pool(journal_dsn, max_size=4)
    wakes = Wakes()
    try:
        yield Db(Journal(pool, wakes, crash_loop_limit=3), pool, wakes)
    finally:
        await pool.close()


def run_id() -> str:
    """A run id of its own for each test (the default namespace's)."""
    return f"run-{uuid.uuid4().hex[:10]}"


async def started(journal: Journal, *, key: str = "", fence: int = 1) -> Lease:
    """A new run, loaded under `fence` by `key`: the lease its worker holds."""
    workflow_id = run_id()
    await journal.start(workflow_id, "flow", "q", json_payload('"in"'))
    lease = Lease(workflow_id, fence, key)
    await journal.load(lease)
    return lease


def call(lease: Lease, position: int, step_id: str = "") -> Call:
    """The call of the code at `position` (its step id from the position unless given)."""
    return Call(lease, step_id or f"step-{position}", "step", position)


async def refusal(awaitable: Awaitable[object]) -> ApiError:
    """The ApiError the call raises (it must raise one)."""
    with pytest.raises(ApiError) as raised:
        await awaitable
    return raised.value
