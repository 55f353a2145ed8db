"""Numbered SQL migrations, applied once per schema under an advisory lock.

A migration runs in one transaction, unless its first line is NO_TRANSACTION: then its
statements run one at a time outside any (CREATE INDEX CONCURRENTLY, which builds an index
while writes go on, can run no other way). Such a migration's statements end with a semicolon
at the end of a line, and each must be safe to run again: one stopped part way is not
recorded, and runs again from its first statement at the next start.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from importlib import resources

from psycopg import AsyncConnection, sql

log = logging.getLogger(__name__)


NO_TRANSACTION = "-- perdure: no transaction"
# How often a replica asks again for the migration lock another holds. It asks with
# pg_try_advisory_lock between pauses, never waits inside a statement: a session waiting in
# one holds a snapshot, which a concurrent index build would wait for in turn (a deadlock).
LOCK_POLL_SECONDS = 0.1
_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)


class MigrationError(RuntimeError):
    """An applied migration file was edited, or the files are misnamed."""


def _migration_files(package: str) -> list[tuple[int, str, str]]:
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        number, _, _ = entry.name.partition("_")
        if not number.isdigit():
            raise MigrationError(f"migration {entry.name} must start with a number, e.g. 0001_")
        found.append((int(number), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def apply_migrations(conn: AsyncConnection, schema: str, package: str) -> list[str]:
    """Apply the package's pending migrations to `schema`; return the names applied.

    Safe when several replicas start at once: they take turns on an advisory lock keyed by
    schema. `conn` must be in autocommit mode: each migration makes its own transaction.
    """
    if not conn.autocommit:
        raise MigrationError("migrations need a connection in autocommit mode")
    schema_id = sql.Identifier(schema)
    applied_now: list[str] = []
    await _lock(conn, f"perdure.migrate.{schema}")
    try:
        async with conn.transaction():
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema_id))
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                    " version int PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(schema_id)
            )
        cursor = await conn.execute(
            sql.SQL("SELECT version, checksum FROM {}.schema_migrations").format(schema_id)
        )
        applied = {int(row[0]): str(row[1]) for row in await cursor.fetchall()}
        for version, name, text in _migration_files(package):
            checksum = hashlib.sha256(text.encode()).hexdigest()
            if version in applied:
                if applied[version] != checksum:
                    raise MigrationError(f"{schema} migration {name} changed after it was applied")
                continue
            record = sql.SQL(
                "INSERT INTO {}.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"
            ).format(schema_id)
            if text.startswith(NO_TRANSACTION):
                await _run_statements(conn, schema_id, text)
                await conn.execute(record, [version, name, checksum])
            else:
                async with conn.transaction():
                    await conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema_id))
                    await conn.execute(text.encode(), prepare=False)  # several statements
                    await conn.execute(record, [version, name, checksum])
            applied_now.append(name)
            log.info("applied %s migration %s", schema, name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [f"perdure.migrate.{schema}"])
    return applied_now


async def _lock(conn: AsyncConnection, key: str) -> None:
    """Take the advisory lock `key`, asking again every LOCK_POLL_SECONDS while another
    session holds it."""
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [key])
        row = await cursor.fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(LOCK_POLL_SECONDS)


async def _run_statements(conn: AsyncConnection, schema_id: sql.Identifier, text: str) -> None:
    """Run a NO_TRANSACTION migration's statements one at a time, each in its own implicit
    transaction, with the schema first on the search path."""
    await conn.execute(sql.SQL("SET search_path TO {}").format(schema_id))
    try:
        for statement in _STATEMENT_END.split(text):
            code = [line for line in statement.splitlines() if not line.lstrip().startswith("--")]
            if "".join(code).strip():
                await conn.execute(statement.encode(), prepare=False)  # run once
    finally:
        await conn.execute("RESET search_path")
