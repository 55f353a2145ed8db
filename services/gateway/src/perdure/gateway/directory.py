"""The directory of a gateway with several cells: which cell each run (schedule, keyed start)
lives in, recorded once and never changed, in a database of its own
(PERDURE_DIRECTORY_DATABASE_URL; schema "directory", migrations in this package's
migrations/). Placements are remembered in memory too: a run never moves."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.migrate import apply_migrations

LOOKUP = """
SELECT cell FROM directory.placements
WHERE namespace = %(namespace)s AND kind = %(kind)s AND key = %(key)s
"""
# The first placement of a key wins; a second gateway placing it at the same moment gets the
# first one's cell (read again below when this statement's snapshot could not see it).
RECORD = """
WITH placed AS (
    INSERT INTO directory.placements (namespace, kind, key, cell)
    VALUES (%(namespace)s, %(kind)s, %(key)s, %(cell)s)
    ON CONFLICT DO NOTHING
    RETURNING cell
)
SELECT cell FROM placed
UNION ALL
SELECT cell FROM directory.placements
WHERE namespace = %(namespace)s AND kind = %(kind)s AND key = %(key)s
LIMIT 1
"""
REMEMBERED = 200_000  # placements kept in memory, oldest forgotten first


class Directory:
    """Placements, read through a bounded memory of them."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self._known: dict[tuple[str, str, str], str] = {}

    @classmethod
    async def open(cls, dsn: str) -> Directory:
        """Connect and bring the directory's schema up to date."""
        pool = await open_pool(dsn, name="perdure-gateway-directory")
        async with pool.connection() as conn:
            await apply_migrations(conn, "directory", "perdure.gateway")
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    def remembered(self, namespace: str, kind: str, key: str) -> str | None:
        """The cell this gateway has seen recorded for the key, or None (not asking)."""
        return self._known.get((namespace, kind, key))

    async def lookup(self, namespace: str, kind: str, key: str) -> str | None:
        """The cell recorded for the key, or None."""
        known = self.remembered(namespace, kind, key)
        if known is not None:
            return known
        params = {"namespace": namespace, "kind": kind, "key": key}
        async with self._pool.connection() as conn:
            row = await (await conn.execute(LOOKUP, params)).fetchone()
        if row is None:
            return None
        return self._remember(namespace, kind, key, str(row[0]))

    async def record(self, namespace: str, kind: str, key: str, cell: str) -> str:
        """Record `cell` for the key unless one is recorded already; the cell that stands."""
        params = {"namespace": namespace, "kind": kind, "key": key, "cell": cell}
        async with self._pool.connection() as conn:
            row = await (await conn.execute(RECORD, params)).fetchone()
            if row is None:  # placed concurrently, committed after this statement began
                row = await (await conn.execute(LOOKUP, params)).fetchone()
        assert row is not None
        return self._remember(namespace, kind, key, str(row[0]))

    def _remember(self, namespace: str, kind: str, key: str, cell: str) -> str:
        if len(self._known) >= REMEMBERED:
            del self._known[next(iter(self._known))]
        self._known[(namespace, kind, key)] = cell
        return cell
