"""Fails runs whose execution timeout has passed, whether or not any worker is alive."""

from __future__ import annotations

import logging

from psycopg_pool import AsyncConnectionPool

from perdure.common.background import BackgroundLoop
from perdure.common.text import printable
from perdure.history.fencing import OPEN
from perdure.history.metrics import count_closed, timed_write
from perdure.history.model import EventType, RunStatus
from perdure.history.rows import fetch_all
from perdure.history.store import count_event, event_values, insert_event
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how late past its deadline a run may fail, at most (plus the write)
EXPIRE_BATCH = 200


# Fails the open runs whose execution deadline has passed, a batch at a time (replicas side by
# side skip each other's rows), with no lease: the run's code may be running nowhere.
EXPIRE_RUNS = (
    f"""
WITH due AS (
    SELECT workflow_id, jsonb_build_object(
            'type', 'ExecutionTimeout',
            'message', 'the run did not finish within its execution timeout of '
                || trim_scale(round(extract(epoch FROM deadline - created_at)::numeric, 3))
                || 's (from its start); it was failed at its deadline',
            'stack_trace', '') AS failure
    FROM history.workflows
    WHERE deadline <= now() AND status IN {OPEN}
    ORDER BY deadline LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), appended AS (
    UPDATE history.workflows w
    SET {count_event(event_values(failure="due.failure"))}, status = 'FAILED',
        closed_at = now(), wait_kind = NULL, wait_name = NULL, wait_until = NULL,
        failure = due.failure
    FROM due WHERE w.workflow_id = due.workflow_id
    RETURNING w.workflow_id, w.workflow_type, w.event_count, w.failure, w.part
)"""
    + insert_event(
        event_values(
            event_type=f"'{EventType.WORKFLOW_FAILED}'", fence="0", failure="appended.failure"
        )
    )
    + """
SELECT workflow_id, workflow_type FROM appended
"""
)


async def expire_runs(pool: AsyncConnectionPool) -> int:
    """Fail the open runs past their execution deadline (a batch); how many were failed."""
    async with pool.connection() as conn:
        with timed_write("workflow_failed"):
            rows = await fetch_all(conn, EXPIRE_RUNS, {"limit": EXPIRE_BATCH})
    for row in rows:
        log.info("workflow %s failed: execution timeout", printable(row["workflow_id"]))
        count_closed(row["workflow_type"], RunStatus.FAILED)
    return len(rows)


class DeadlineWatch(BackgroundLoop):
    """Looks for runs past their deadline twice a second and fails them; stopped, runs past
    their deadline fail at the next start (or at another replica)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        super().__init__("deadline watch", self.expire, POLL_SECONDS)
        self._pool = pool

    async def expire(self) -> None:
        """Fail every open run past its execution deadline, a batch at a time."""
        with untraced():  # the poll runs all the time; the closes are logged
            while await expire_runs(self._pool) == EXPIRE_BATCH:
                pass
