"""Lease grants: which due tasks a session is granted, each with a fresh fence."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

# A task is grantable when it is due and unleased, or when its lease has expired: a worker
# that is paused or cut off keeps its connection, so only the deadline decides. A task woken by
# a timer is grantable `timer_lookahead` early, to a worker that waits out the rest itself.
# SKIP LOCKED lets scheduler replicas grant side by side without granting one task twice.
# Workflow tasks go to sessions declaring their workflow type, step tasks to those declaring
# their step type.
CLAIM = """
WITH due AS (
    SELECT workflow_id, step_id, lease_owner AS previous_owner,
           COALESCE(run_at, lease_expires_at) AS due_at, due_reason FROM scheduler.tasks
    WHERE task_queue = %(task_queue)s
      AND CASE WHEN step_id = '' THEN workflow_type = ANY(%(types)s)
               ELSE workflow_type = ANY(%(step_types)s) END
      AND NOT closed
      AND ((lease_owner IS NULL AND run_at <= now())
           OR (lease_owner IS NULL AND due_reason = 'timer'
               AND run_at <= now() + make_interval(secs => %(timer_lookahead)s))
           OR (lease_owner IS NOT NULL AND lease_expires_at <= now()))
    ORDER BY run_at NULLS FIRST
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE scheduler.tasks t
SET fence = t.fence + 1, lease_owner = %(session)s, lease_key = %(key)s, run_at = NULL,
    due_reason = NULL,
    updated_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl)s)
FROM due WHERE t.workflow_id = due.workflow_id AND t.step_id = due.step_id
RETURNING t.workflow_id, t.step_id, t.workflow_type, t.fence, due.previous_owner, due.due_at,
          EXTRACT(EPOCH FROM now() - due.due_at)::float8 AS late_by, due.due_reason,
          t.trace_context, t.lease_expires_at
"""


@dataclass(frozen=True)
class Grant:
    """A lease just granted."""

    workflow_id: str
    step_id: str  # '' for a workflow task
    task_type: str  # the workflow type, or a step task's step type
    fence: int
    previous_owner: str | None  # set when the lease expired and this grant takes over
    due_at: datetime
    late_by: float  # seconds from due to granted, on the database clock (< 0: granted ahead)
    due_reason: str | None  # timer, signal, retry: a timed wake-up firing
    trace_context: dict[str, str] | None
    lease_expires_at: datetime  # database clock


class Grants:
    """Granting due tasks to a session."""

    _pool: AsyncConnectionPool

    async def claim(
        self,
        session: str,
        task_queue: str,
        types: list[str],
        step_types: list[str],
        limit: int,
        ttl: float,
        timer_lookahead: float = 0.0,
        key: str = "",
    ) -> list[Grant]:
        """Lease up to `limit` grantable tasks of these workflow and step types to a session,
        each with a fresh fence (timer tasks up to `timer_lookahead` seconds before they are
        due). `key` is the API key the session authenticated with ("" without keys)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                CLAIM,
                {
                    "key": key,
                    "task_queue": task_queue,
                    "types": types,
                    "step_types": step_types,
                    "limit": limit,
                    "session": session,
                    "ttl": ttl,
                    "timer_lookahead": timer_lookahead,
                },
            )
            return [Grant(*row) for row in await cur.fetchall()]
