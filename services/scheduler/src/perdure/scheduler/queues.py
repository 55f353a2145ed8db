"""Task queues: the types workers declared on each, and each one's backlog."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

# Per known queue, the tasks due and unleased (the partial index on run_at serves it).
BACKLOG = """
SELECT q.task_queue, (
    SELECT count(*) FROM scheduler.tasks t
    WHERE t.task_queue = q.task_queue AND t.lease_owner IS NULL AND t.run_at <= now()
) FROM (SELECT DISTINCT task_queue FROM scheduler.workflow_types) q
"""

REGISTER_TYPE = """
INSERT INTO scheduler.workflow_types (task_queue, workflow_type) VALUES (%s, %s)
ON CONFLICT (task_queue, workflow_type) DO UPDATE SET last_seen_at = now()
"""

SELECT_TYPES = """
SELECT workflow_type FROM scheduler.workflow_types WHERE task_queue = %s ORDER BY workflow_type
"""


class Queues:
    """The task queues' declared types and backlog."""

    _pool: AsyncConnectionPool

    async def backlog(self) -> dict[str, int]:
        """Due, unleased tasks per known task queue."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(BACKLOG)
            return {str(queue): int(count) for queue, count in await cur.fetchall()}

    async def register_types(self, task_queue: str, types: list[str]) -> None:
        """Remember the workflow types a worker declared on a queue."""
        async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(REGISTER_TYPE, [(task_queue, t) for t in types])

    async def registered_types(self, task_queue: str) -> list[str]:
        """The workflow types ever declared on a queue."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_TYPES, [task_queue])
            return [str(row[0]) for row in await cur.fetchall()]
