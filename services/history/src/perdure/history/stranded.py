"""The stranded-run sweep: an open run that needs a worker but has no lease, no task and no
wake-up at the scheduler (its database was reset, or a grant was refused and reported done) is
reported (a log line, perdure.workflow.stuck, `perdure workflow list --stuck`) and made due
again, above its fence mark.

History and the scheduler own separate schemas, so the sweep asks the scheduler which of the
runs quiet for PERDURE_STUCK_AFTER seconds it has nothing for."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime

import grpc
from psycopg_pool import AsyncConnectionPool

from perdure.common.background import BackgroundLoop
from perdure.common.text import printable
from perdure.history.fencing import OPEN
from perdure.history.metrics import STUCK_RUNS
from perdure.history.rows import fetch_all
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sched_grpc
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

DEFAULT_STUCK_AFTER_SECONDS = 60.0
MAX_SWEEP_INTERVAL_SECONDS = 30.0
BATCH = 1000  # runs asked about per sweep (FindIdleRuns takes at most this many)


# An open run that needs a worker now or at a known time (the workflows row aliased `w`):
# running; or waiting with a wake-up time, a cancel request, a signal it waits for that is not
# consumed, or a remote step it waits for that has its outcome.
_NEEDS_WORKER = """(
    w.status = 'RUNNING' OR w.wait_until IS NOT NULL OR w.cancel_requested
    OR (w.wait_kind = 'SIGNAL' AND EXISTS (
        SELECT 1 FROM history.events s
        WHERE s.workflow_id = w.workflow_id AND s.event_type = 'SIGNAL_RECEIVED'
          AND s.name = w.wait_name
          AND NOT EXISTS (SELECT 1 FROM history.signal_consumptions c
                          WHERE c.workflow_id = s.workflow_id AND c.event_id = s.event_id)))
    OR (w.wait_kind = 'STEP' AND EXISTS (
        SELECT 1 FROM history.step_tasks t
        WHERE t.workflow_id = w.workflow_id AND t.step_id = w.wait_name AND t.closed))
)"""

# Open runs that need a worker and have had no journal write for `quiet` seconds, with no
# scheduling request waiting in the outbox, a page after (after_at, after_id): the scheduler is
# asked which of them it has no leased or due task for.
SELECT_QUIET_RUNS = f"""
SELECT w.workflow_id, w.updated_at FROM history.workflows w
WHERE w.status IN {OPEN} AND {_NEEDS_WORKER}
  AND w.updated_at < now() - make_interval(secs => %(quiet)s)
  AND NOT EXISTS (SELECT 1 FROM history.outbox o WHERE o.workflow_id = w.workflow_id)
  AND (w.updated_at, w.workflow_id) > (%(after_at)s::timestamptz, %(after_id)s::text)
ORDER BY w.updated_at, w.workflow_id
LIMIT %(limit)s
"""

# Marks the idle ones stuck and makes each due again (a waiting one at its wake-up time), the
# request carrying the fence mark as the relay sends it. Still quiet, or it moved on meanwhile.
# A timed wait's wake reason is its kind in lower case, as WaitKind.wake_reason spells it.
REQUEUE_STRANDED = f"""
WITH stranded AS (
    UPDATE history.workflows w SET stuck_since = COALESCE(w.stuck_since, now())
    WHERE w.workflow_id = ANY(%(ids)s) AND w.status IN {OPEN} AND {_NEEDS_WORKER}
      AND w.updated_at < now() - make_interval(secs => %(quiet)s)
    RETURNING w.workflow_id, w.workflow_type, w.task_queue, w.status, w.wait_kind, w.wait_until,
              w.cancel_requested, w.updated_at, w.run_number
), scheduled AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, run_at, wake_reason, run_number)
    SELECT workflow_id, workflow_type, task_queue,
           CASE WHEN status = 'WAITING' AND NOT cancel_requested THEN wait_until END,
           CASE WHEN status = 'WAITING' AND wait_until IS NOT NULL THEN lower(wait_kind) END,
           run_number
    FROM stranded
)
SELECT workflow_id, workflow_type, status, updated_at FROM stranded
"""


def stuck_after() -> float:
    """How long a run may be quiet and idle before it counts as stuck (PERDURE_STUCK_AFTER,
    seconds; 0 turns the sweep off)."""
    raw = os.environ.get("PERDURE_STUCK_AFTER", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STUCK_AFTER_SECONDS
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise SystemExit(f"PERDURE_STUCK_AFTER must be a number of seconds (0: off), not {raw!r}")
    return value


class StrandedSweep(BackgroundLoop):
    """Looks for stranded runs every half threshold (at most every 30 s) in the background."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        scheduler: sched_grpc.SchedulerServiceStub,
        on_scheduled: Callable[[], None],
        quiet: float,
    ) -> None:
        super().__init__(
            "stranded-run sweep",
            self._sweep_untraced,
            min(quiet / 2, MAX_SWEEP_INTERVAL_SECONDS),
            transient=(grpc.aio.AioRpcError, OSError),  # the scheduler, unreachable a while
        )
        self._pool = pool
        self._scheduler = scheduler
        self._on_scheduled = on_scheduled  # wakes the outbox relay
        self._quiet = quiet

    def start(self) -> None:
        """Sweep in the background (not at all when the threshold is 0)."""
        if self._quiet > 0:
            super().start()

    async def _sweep_untraced(self) -> None:
        with untraced():
            await self.sweep()

    async def sweep(self) -> list[str]:
        """Report and make due again the stranded runs found now, looking at every quiet run
        page by page (runs a lease holds for long stay quiet: they must not hide the rest);
        return their ids."""
        found: list[str] = []
        after: tuple[datetime, str] = (datetime.min.replace(tzinfo=UTC), "")
        while True:
            params = {
                "quiet": self._quiet,
                "limit": BATCH,
                "after_at": after[0],
                "after_id": after[1],
            }
            async with self._pool.connection() as conn:
                rows = await fetch_all(conn, SELECT_QUIET_RUNS, params)
            if not rows:
                return found
            found += await self._requeue_idle([row["workflow_id"] for row in rows])
            if len(rows) < BATCH:
                return found
            after = (rows[-1]["updated_at"], rows[-1]["workflow_id"])

    async def _requeue_idle(self, quiet: list[str]) -> list[str]:
        """Of the quiet runs, make due again those the scheduler has nothing for."""
        answer = await self._scheduler.FindIdleRuns(
            sched.FindIdleRunsRequest(workflow_ids=quiet), timeout=10
        )
        if not answer.workflow_ids:
            return []
        async with self._pool.connection() as conn:
            stranded = await fetch_all(
                conn,
                REQUEUE_STRANDED,
                {"ids": list(answer.workflow_ids), "quiet": self._quiet},
            )
        for row in stranded:
            STUCK_RUNS.add(1, {"perdure.workflow.type": row["workflow_type"]})
            log.warning(
                "workflow %s is %s with no lease, no task and no wake-up (no journal write since "
                "%s); making it due again",
                printable(row["workflow_id"]),
                row["status"],
                row["updated_at"].isoformat(),
            )
        if stranded:
            self._on_scheduled()
        return [row["workflow_id"] for row in stranded]
