"""Connection pools and the choice of database for a service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import cast

import psycopg
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from perdure.common.embedded_db import DEFAULT_DATA_DIR, start_embedded_postgres
from perdure.common.migrate import apply_migrations
from perdure.common.replication import (
    CONFIRM_STATEMENT,
    WatchedConnection,
    take_unconfirmed,
    watch_commits,
)

log = logging.getLogger(__name__)

# What every service connection sets unless its DSN does: a host that does not answer is
# given up after 10 s (the next host of a multi-host URL is tried), and TCP keepalives find a
# server that vanished without closing its connections (a node lost, a partition) within
# about 20 s, for the pools and the LISTEN connections alike, not after the kernel's 2 hours.
CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
}


def resolve_dsn(service: str, explicit: str | None = None) -> str:
    """Pick the service's database: flag, PERDURE_<SERVICE>_DATABASE_URL, PERDURE_DATABASE_URL,
    or else the embedded PostgreSQL in PERDURE_DATA_DIR (default ./.perdure/)."""
    dsn = (
        explicit
        or os.environ.get(f"PERDURE_{service.upper()}_DATABASE_URL")
        or os.environ.get("PERDURE_DATABASE_URL")
    )
    if dsn:
        return dsn
    data_dir = os.environ.get("PERDURE_DATA_DIR", DEFAULT_DATA_DIR)
    return start_embedded_postgres(data_dir, keep_running=True)


def instrument_database() -> None:
    """Database spans for every statement (its text, never its parameter values)."""
    PsycopgInstrumentor().instrument(enable_commenter=False, capture_parameters=False)


class _Pool(AsyncConnectionPool):
    """A pool that, once a caller finds one of its connections lost, checks every connection
    it holds idle at once: a restart, a failover or a terminated backend loses them all, and
    each would otherwise fail one more caller before the pool replaced it.

    It never lets a commit the synchronous standby did not confirm pass for a success (see
    perdure.common.replication): the call that made it fails with UnconfirmedCommit, its
    connection is closed, and until a commit is confirmed again every caller first waits for
    the standby to confirm everything committed before (a retry must not find that commit and
    report it done while only the primary has it)."""

    _checking: asyncio.Task[None] | None = None
    _unconfirmed = False

    async def putconn(self, conn: AsyncConnection) -> None:
        if conn.broken and (self._checking is None or self._checking.done()):
            self._checking = asyncio.create_task(self.check(), name="pool check")
        await super().putconn(conn)

    @asynccontextmanager
    async def connection(
        self,
        timeout: float | None = None,  # noqa: ASYNC109 (psycopg_pool's signature)
    ) -> AsyncIterator[AsyncConnection]:
        async with super().connection(timeout) as pooled:
            conn = cast(WatchedConnection, pooled)  # open_pool's connection_class
            unconfirmed = None
            try:
                if self._unconfirmed:
                    await self._confirm(conn)
                if not conn.unconfirmed:
                    yield conn
            finally:
                unconfirmed = take_unconfirmed(conn)
                if unconfirmed is not None:
                    self._unconfirmed = True
                    log.warning("%s; closing its connection", unconfirmed)
                    await conn.close()
            if unconfirmed is not None:
                raise unconfirmed

    async def _confirm(self, conn: WatchedConnection) -> None:
        """Wait for the standby to confirm every commit so far (a commit of its own)."""
        await conn.execute(CONFIRM_STATEMENT)
        if not conn.unconfirmed and self._unconfirmed:
            self._unconfirmed = False
            log.info("the synchronous standby confirmed every commit again")


# Executions of a statement on a connection before psycopg prepares it (its default is 5, and
# until then PostgreSQL parses and plans the statement at every execution). The services run
# the same few dozen statements for their whole life, so each is prepared at once: a fresh
# connection (a start, a deploy, a pool that grew or replaced one) costs no more per statement
# than one that has served for hours. A text of several statements (a migration) says
# prepare=False.
PREPARE_THRESHOLD = 0


async def open_pool(
    dsn: str, *, max_size: int = 10, generic_plans: bool = False, name: str = ""
) -> AsyncConnectionPool:
    """Open an autocommit pool; callers group writes with explicit transactions. Its
    connections prepare every statement at its first execution (PREPARE_THRESHOLD). With
    `generic_plans`, a prepared statement is planned once, not at every execution (for
    statements PostgreSQL would otherwise re-plan each time: see _plan_once). Its connections
    show as `name` in pg_stat_activity (application_name), unless the DSN names one."""
    pool = _Pool(
        dsn,
        connection_class=WatchedConnection,
        min_size=1,
        max_size=max_size,
        kwargs={
            "autocommit": True,
            "prepare_threshold": PREPARE_THRESHOLD,
            **connection_params(dsn, name),
        },
        configure=_configure_planning_once if generic_plans else _configure,
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


def connection_params(dsn: str, name: str) -> dict[str, str]:
    """What every service connection adds to its DSN: its name (see named), a connect timeout
    and TCP keepalives (CONNECTION_DEFAULTS), each unless the DSN sets it."""
    given = conninfo_to_dict(dsn)
    defaults = {key: value for key, value in CONNECTION_DEFAULTS.items() if key not in given}
    return {**defaults, **named(dsn, name)}


def named(dsn: str, name: str) -> dict[str, str]:
    """Connection parameters that name the connection `name` for the database's views
    (pg_stat_activity.application_name): none when the DSN names it already, or no name."""
    if not name or "application_name" in conninfo_to_dict(dsn):
        return {}
    return {"application_name": name}


async def _configure(conn: AsyncConnection) -> None:
    watch_commits(cast(WatchedConnection, conn))  # open_pool's connection_class


async def _configure_planning_once(conn: AsyncConnection) -> None:
    await _configure(conn)
    await _plan_once(conn)


async def _plan_once(conn: AsyncConnection) -> None:
    # PostgreSQL keeps planning a prepared statement at each execution (a custom plan) while
    # it estimates its generic plan dearer, as it does for a statement reading arrays of
    # parameters (unnest: rows unknown until bound): planning then costs more than running it.
    # Only for statements whose generic plan is as good: one with optional filters ("x IS
    # NULL OR ...") needs its custom plans, so this is a pool of its own, not every pool's.
    await conn.execute("SET plan_cache_mode = force_generic_plan")


# How long a readiness check waits for a connection and its answer.
READY_CHECK_SECONDS = 5.0


async def primary_reachable(pool: AsyncConnectionPool) -> bool:
    """Whether the pool reaches a server that takes writes (not a standby in recovery) within
    READY_CHECK_SECONDS: a service is not ready without one (during a failover, say)."""
    try:
        async with asyncio.timeout(READY_CHECK_SECONDS), pool.connection() as conn:
            row = await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone()
    except (psycopg.Error, PoolTimeout, TimeoutError):
        return False
    return row is not None and not row[0]


async def open_migrated_pool(service: str, explicit_dsn: str | None) -> AsyncConnectionPool:
    """Open the service's pool and apply its pending migrations (package perdure.<service>)."""
    # Starting the embedded server blocks for seconds: keep it off the event loop.
    dsn = await asyncio.to_thread(resolve_dsn, service, explicit_dsn)
    pool = await open_pool(dsn, name=f"perdure-{service}")
    async with pool.connection() as conn:
        await apply_migrations(conn, service, f"perdure.{service}")
    return pool


def transaction_if(conn: AsyncConnection, needed: bool) -> AbstractAsyncContextManager[object]:
    """A transaction (a savepoint inside one) on an autocommit connection when `needed`;
    nothing otherwise: one statement is atomic alone, and a transaction around it would cost a
    round trip to open it."""
    return conn.transaction() if needed else contextlib.nullcontext()
