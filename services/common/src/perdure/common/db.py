"""Connection pools and the choice of database for a service."""

from __future__ import annotations

import asyncio
import contextlib
import os
from contextlib import AbstractAsyncContextManager

from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from perdure.common.embedded_db import DEFAULT_DATA_DIR, start_embedded_postgres
from perdure.common.migrate import apply_migrations


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
    each would otherwise fail one more caller before the pool replaced it."""

    _checking: asyncio.Task[None] | None = None

    async def putconn(self, conn: AsyncConnection) -> None:
        if conn.broken and (self._checking is None or self._checking.done()):
            self._checking = asyncio.create_task(self.check(), name="pool check")
        await super().putconn(conn)


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
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "prepare_threshold": PREPARE_THRESHOLD, **named(dsn, name)},
        configure=_plan_once if generic_plans else None,
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


def named(dsn: str, name: str) -> dict[str, str]:
    """Connection parameters that name the connection `name` for the database's views
    (pg_stat_activity.application_name): none when the DSN names it already, or no name."""
    if not name or "application_name" in conninfo_to_dict(dsn):
        return {}
    return {"application_name": name}


async def _plan_once(conn: AsyncConnection) -> None:
    # PostgreSQL keeps planning a prepared statement at each execution (a custom plan) while
    # it estimates its generic plan dearer, as it does for a statement reading arrays of
    # parameters (unnest: rows unknown until bound): planning then costs more than running it.
    # Only for statements whose generic plan is as good: one with optional filters ("x IS
    # NULL OR ...") needs its custom plans, so this is a pool of its own, not every pool's.
    await conn.execute("SET plan_cache_mode = force_generic_plan")


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
