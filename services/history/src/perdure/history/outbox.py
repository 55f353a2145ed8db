"""Relays committed scheduling requests from the outbox to the scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
from opentelemetry import trace
from psycopg_pool import AsyncConnectionPool

from perdure.common.aio import wait_event
from perdure.common.convert import timestamp
from perdure.history import store
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sched_grpc
from perdure.telemetry.propagation import links_to, untraced

log = logging.getLogger(__name__)
tracer = trace.get_tracer("perdure.history")

BATCH = 200
POLL_SECONDS = 1.0


class OutboxRelay:
    """Sends outbox rows to the scheduler and deletes them once it has acknowledged them.

    A request survives any crash: it is deleted only after the scheduler's answer, so a
    crash in between sends it again, which the scheduler's idempotent enqueue absorbs.
    """

    def __init__(
        self, pool: AsyncConnectionPool, scheduler: sched_grpc.SchedulerServiceStub
    ) -> None:
        self._pool = pool
        self._scheduler = scheduler
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        """Relay soon: a transaction with outbox rows just committed."""
        self._wake.set()

    def start(self) -> None:
        """Run the relay in the background."""
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        """Stop relaying; what is left stays in the outbox for the next start."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await wait_event(self._wake, POLL_SECONDS)
            self._wake.clear()
            try:
                while await self._relay_batch() == BATCH:
                    pass
            except (grpc.aio.AioRpcError, OSError) as error:
                log.warning("outbox relay to the scheduler failed, will retry: %s", error)
            except Exception:
                log.exception("outbox relay failed, will retry")

    async def _relay_batch(self) -> int:
        async with self._pool.connection() as conn, conn.transaction():
            with untraced():  # the poll runs every second; only a relay is worth a trace
                rows = await store.fetch_all(conn, store.CLAIM_OUTBOX, [BATCH])
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
                await conn.execute(store.DELETE_OUTBOX, [[row["id"] for row in rows]])
        return len(rows)
