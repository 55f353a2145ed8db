"""Relays committed scheduling requests from the outbox to the scheduler."""

from __future__ import annotations

import asyncio

import grpc
from opentelemetry import trace
from psycopg_pool import AsyncConnectionPool

from perdure.common.background import BackgroundLoop
from perdure.common.convert import timestamp
from perdure.history.rows import fetch_all
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sched_grpc
from perdure.telemetry.propagation import links_to, untraced

tracer = trace.get_tracer("perdure.history")

BATCH = 200
POLL_SECONDS = 1.0


# SKIP LOCKED lets several history replicas relay side by side; a request relayed twice is
# harmless because the scheduler's enqueue is idempotent. Each carries the fence mark of its
# task (the run's, or a remote step's own) as it is when relayed: the scheduler grants above it.
# A run no lease loaded yet (loaded_event_count 0) has a mark nobody holds (a chain's next run
# starts one above its predecessor's, chains.py): the next grant may be that very fence, and the
# lease of the run before, still held by the worker that continued it, stays in order. Each
# carries the run number it was written for: the scheduler ignores a late one of an older run.
CLAIM_OUTBOX = """
SELECT o.id, o.workflow_id, o.workflow_type, o.task_queue, o.run_at, o.wake_reason,
       o.step_id, o.closed, o.run_number, w.trace_context,
       COALESCE(CASE WHEN o.step_id IS NOT NULL THEN s.fence
                     WHEN w.loaded_event_count = 0 THEN GREATEST(w.fence - 1, 0)
                     ELSE w.fence END, 0) AS fence
FROM history.outbox o LEFT JOIN history.workflows w USING (workflow_id)
LEFT JOIN history.step_tasks s ON s.workflow_id = o.workflow_id AND s.step_id = o.step_id
ORDER BY o.id LIMIT %s FOR UPDATE OF o SKIP LOCKED
"""

DELETE_OUTBOX = "DELETE FROM history.outbox WHERE id = ANY(%s)"


class OutboxRelay(BackgroundLoop):
    """Sends outbox rows to the scheduler and deletes them once it has acknowledged them.

    A request survives any crash: it is deleted only after the scheduler's answer, so a
    crash in between sends it again, which the scheduler's idempotent enqueue absorbs.
    Stopped, what is left stays in the outbox for the next start.
    """

    def __init__(
        self, pool: AsyncConnectionPool, scheduler: sched_grpc.SchedulerServiceStub
    ) -> None:
        self._relay_soon = asyncio.Event()
        super().__init__(
            "outbox relay",
            self.relay,
            POLL_SECONDS,
            wake=self._relay_soon,
            transient=(grpc.aio.AioRpcError, OSError),  # the scheduler, unreachable a while
        )
        self._pool = pool
        self._scheduler = scheduler

    def notify(self) -> None:
        """Relay soon: a transaction with outbox rows just committed."""
        self._relay_soon.set()

    async def relay(self) -> None:
        """Relay everything in the outbox now, a batch at a time."""
        while await self._relay_batch() == BATCH:
            pass

    async def _relay_batch(self) -> int:
        async with self._pool.connection() as conn, conn.transaction():
            with untraced():  # the poll runs every second; only a relay is worth a trace
                rows = await fetch_all(conn, CLAIM_OUTBOX, [BATCH])
            if not rows:
                return 0
            tasks = [
                sched.TaskRequest(
                    workflow_id=row["workflow_id"],
                    workflow_type=row["workflow_type"],
                    task_queue=row["task_queue"],
                    run_time=timestamp(row["run_at"]),
                    trace_context=row["trace_context"] or {},
                    wake_reason=row["wake_reason"] or "",
                    step_id=row["step_id"] or "",
                    fence_floor=row["fence"],
                    closed=row["closed"],
                    run_number=row["run_number"],
                )
                for row in rows
            ]
            # One span per batch, linked to the trace of every workflow it schedules.
            links = links_to(*(task.trace_context for task in tasks))
            with tracer.start_as_current_span(
                "perdure.outbox.relay", links=links, attributes={"perdure.tasks": len(tasks)}
            ):
                request = sched.EnqueueTasksRequest(tasks=tasks)
                await self._scheduler.EnqueueTasks(request, timeout=10)
                await conn.execute(DELETE_OUTBOX, [[row["id"] for row in rows]])
        return len(rows)
