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
from perdure.history import store
from perdure.history.metrics import STUCK_RUNS
from perdure.history.rows import fetch_all
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sched_grpc
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

DEFAULT_STUCK_AFTER_SECONDS = 60.0
MAX_SWEEP_INTERVAL_SECONDS = 30.0
BATCH = 1000  # runs asked about per sweep (FindIdleRuns takes at most this many)


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
                rows = await fetch_all(conn, store.SELECT_QUIET_RUNS, params)
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
                store.REQUEUE_STRANDED,
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
