"""Numbered SQL migrations, applied once per schema under an advisory lock."""

from __future__ import annotations

import hashlib
import logging
from importlib import resources

from psycopg import AsyncConnection, sql

log = logging.getLogger(__name__)


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

    Safe when several replicas start at once: they queue on an advisory lock keyed by schema.
    """
    schema_id = sql.Identifier(schema)
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [f"perdure.migrate.{schema}"])
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
            async with conn.transaction():
                await conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema_id))
                await conn.execute(text.encode())
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.schema_migrations (version, name, checksum)"
                        " VALUES (%s, %s, %s)"
                    ).format(schema_id),
                    [version, name, checksum],
                )
            applied_now.append(name)
            log.info("applied %s migration %s", schema, name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [f"perdure.migrate.{schema}"])
    return applied_now
