"""`perdure migrate`: apply history's and the scheduler's pending migrations, then exit (a
deployment's migration Job; the services also migrate at start, under the same lock)."""

from __future__ import annotations

import argparse
import asyncio

from psycopg import AsyncConnection

from perdure.common.db import resolve_dsn
from perdure.common.migrate import apply_migrations

SCHEMAS = ("history", "scheduler")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `migrate`."""
    parser = subparsers.add_parser("migrate", help="apply pending database migrations and exit")
    parser.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL URL (else PERDURE_<SERVICE>_DATABASE_URL or PERDURE_DATABASE_URL, per "
        "schema)",
    )


def run(args: argparse.Namespace) -> int:
    """Migrate each schema in its database; print what was applied."""
    for schema in SCHEMAS:
        applied = asyncio.run(_migrate(resolve_dsn(schema, args.database_url), schema))
        print(f"{schema}: {', '.join(applied) if applied else 'up to date'}")
    return 0


async def _migrate(dsn: str, schema: str) -> list[str]:
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await apply_migrations(conn, schema, f"perdure.{schema}")
