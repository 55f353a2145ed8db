"""Pauses: a workflow id, a workflow type or a task queue of a namespace whose tasks are
granted to no worker while its row stands (migration 0010). The grant statement excludes them
(`not_paused`); leases already granted run on, and due tasks wait. Lifting a pause makes its
tasks grantable at the next round of every replica (each looks again within MAX_IDLE_SECONDS;
the replica that lifts it at once)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from perdure.common import namespaces


class Scope(StrEnum):
    """What a pause holds, as stored."""

    WORKFLOW = "workflow"  # a workflow id: every task of its runs
    WORKFLOW_TYPE = "workflow_type"  # every task of its runs (step tasks included)
    TASK_QUEUE = "task_queue"  # every task on it, workflow or step task


def not_paused() -> str:
    """SQL, over a row of `scheduler.tasks`: whether no pause holds it. Its parameter: the
    claiming session's namespace (its queue's, so the task's). A step task's row names its step
    type, so its run's workflow type is read from the run's own task row."""
    return f"""NOT EXISTS (
        SELECT 1 FROM scheduler.pauses p
        WHERE p.namespace = %(namespace)s AND (
            (p.scope = '{Scope.TASK_QUEUE}' AND p.name = scheduler.tasks.task_queue)
            OR (p.scope = '{Scope.WORKFLOW}' AND p.name = scheduler.tasks.workflow_id)
            OR (p.scope = '{Scope.WORKFLOW_TYPE}' AND p.name = CASE
                WHEN scheduler.tasks.step_id = '' THEN scheduler.tasks.workflow_type
                ELSE (SELECT r.workflow_type FROM scheduler.tasks r
                      WHERE r.workflow_id = scheduler.tasks.workflow_id AND r.step_id = '')
                END)))"""


# A pause already in force stays as it was (its reason, its time): pausing is idempotent.
PAUSE = """
WITH added AS (
    INSERT INTO scheduler.pauses (namespace, scope, name, reason, paused_by)
    VALUES (%(namespace)s, %(scope)s, %(name)s, %(reason)s, %(paused_by)s)
    ON CONFLICT (namespace, scope, name) DO NOTHING
    RETURNING scope, name, reason, paused_by, paused_at, true AS changed
)
SELECT * FROM added
UNION ALL
SELECT scope, name, reason, paused_by, paused_at, false FROM scheduler.pauses
WHERE namespace = %(namespace)s AND scope = %(scope)s AND name = %(name)s
  AND NOT EXISTS (SELECT 1 FROM added)
"""

UNPAUSE = """
DELETE FROM scheduler.pauses
WHERE namespace = %(namespace)s AND scope = %(scope)s AND name = %(name)s
"""

COUNT_PAUSES = "SELECT namespace, scope, count(*) FROM scheduler.pauses GROUP BY namespace, scope"

SELECT_PAUSES = """
SELECT scope, name, reason, paused_by, paused_at FROM scheduler.pauses
WHERE namespace = %s ORDER BY paused_at, scope, name
"""

# Whether a worker ever declared the type on one of the namespace's queues (the default
# namespace's are unqualified), or the queue.
KNOWN_TYPE = """
SELECT EXISTS (SELECT 1 FROM scheduler.workflow_types
               WHERE workflow_type = %(name)s AND CASE WHEN %(default)s
                   THEN task_queue NOT LIKE '@%%' ELSE task_queue LIKE %(prefix)s END)
"""
KNOWN_QUEUE = "SELECT EXISTS (SELECT 1 FROM scheduler.workflow_types WHERE task_queue = %(name)s)"


@dataclass(frozen=True)
class PauseRow:
    """A pause in force; `name` as stored (qualified for a workflow id or a task queue)."""

    scope: Scope
    name: str
    reason: str
    paused_by: str
    paused_at: datetime

    @property
    def public_name(self) -> str:
        """The name as the namespace's clients write it."""
        if self.scope == Scope.WORKFLOW_TYPE:
            return self.name
        return namespaces.split(self.name)[1]


def stored_name(namespace: str, scope: Scope, name: str) -> str:
    """How a public name of a scope is stored."""
    return name if scope == Scope.WORKFLOW_TYPE else namespaces.qualify(namespace, name)


class Pauses:
    """The pauses in force, in the scheduler schema."""

    _pool: AsyncConnectionPool

    async def pause(
        self, namespace: str, scope: Scope, name: str, reason: str, paused_by: str
    ) -> tuple[PauseRow, bool]:
        """Pause a stored name; the pause in force, and whether this call made it."""
        params = {
            "namespace": namespace,
            "scope": scope.value,
            "name": name,
            "reason": reason,
            "paused_by": paused_by,
        }
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(PAUSE, params)
            row = await cur.fetchone()
        assert row is not None
        changed = bool(row.pop("changed"))
        return _row(row), changed

    async def unpause(self, namespace: str, scope: Scope, name: str) -> bool:
        """Lift a pause; whether there was one."""
        params = {"namespace": namespace, "scope": scope.value, "name": name}
        async with self._pool.connection() as conn:
            cur = await conn.execute(UNPAUSE, params)
            return cur.rowcount > 0

    async def pauses(self, namespace: str) -> list[PauseRow]:
        """The namespace's pauses, oldest first."""
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(SELECT_PAUSES, [namespace])
            return [_row(row) for row in await cur.fetchall()]

    async def pause_counts(self) -> dict[tuple[str, str], int]:
        """How many pauses stand, per namespace and scope."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(COUNT_PAUSES)
            return {(str(ns), str(scope)): int(n) for ns, scope, n in await cur.fetchall()}

    async def declared(self, namespace: str, scope: Scope, name: str) -> bool:
        """Whether a worker ever declared a workflow type or a (stored) task queue in the
        namespace."""
        params: dict[str, object]
        if scope == Scope.TASK_QUEUE:
            statement, params = KNOWN_QUEUE, {"name": name}
        else:
            default = namespace == namespaces.DEFAULT
            prefix = "" if default else namespaces.qualify(namespace, "%")
            statement, params = KNOWN_TYPE, {"name": name, "default": default, "prefix": prefix}
        async with self._pool.connection() as conn:
            cur = await conn.execute(statement, params)
            row = await cur.fetchone()
        return bool(row and row[0])


def _row(row: dict[str, object]) -> PauseRow:
    return PauseRow(
        scope=Scope(str(row["scope"])),
        name=str(row["name"]),
        reason=str(row["reason"]),
        paused_by=str(row["paused_by"]),
        paused_at=row["paused_at"],  # type: ignore[arg-type]
    )
