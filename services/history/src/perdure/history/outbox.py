"""Relays committed scheduling requests from the outbox to the scheduler."""

from __future__ import annotations

import asyncio

import grpc
from psycopg_pool import AsyncConnectionPool

from perdure.common.background import BackgroundLoop
from perdure.common.convert import timestamp
from perdure.history.flow import task_flow
from perdure.history.rows import Row, fetch_all
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sched_grpc
from perdure.telemetry.propagation import links_to, untraced
from perdure.telemetry.spans import Tracer

tracer = Tracer("perdure.history")

BATCH = 200
POLL_SECONDS = 1.0
# Batches relayed side by side with the loop's: a request committed while a batch is on its way
# (several round trips and the scheduler's own statements) goes at once in a batch of its own,
# instead of waiting for that one to end.
EXTRA_BATCHES = 2


# A batch's claim deletes its rows in its transaction, which commits once the scheduler has
# them: a failed send, or a crash, rolls the delete back and the rows are relayed again. SKIP
# LOCKED lets several history replicas relay side by side; a request relayed twice is harmless
# because the scheduler's enqueue is idempotent. Each carries the fence mark of its task (the
# run's, or a remote step's own) as it is when relayed: the scheduler grants above it. A run no
# lease loaded yet (loaded_event_count 0) has a mark nobody holds (a chain's next run starts one
# above its predecessor's, chains.py): the next grant may be that very fence, and the lease of
# the run before, still held by the worker that continued it, stays in order. Each carries the
# run number it was written for: the scheduler ignores a late one of an older run. It leaves
# out the workflows given: those whose rows another batch of this relay has under way.
CLAIM_OUTBOX = """
WITH claimed AS (
    DELETE FROM history.outbox WHERE id IN (
        SELECT id FROM history.outbox WHERE NOT workflow_id = ANY(%s::text[])
        ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
    RETURNING *
)
SELECT o.id, o.workflow_id, o.workflow_type, o.task_queue, o.run_at, o.wake_reason,
       o.step_id, o.closed, o.run_number, o.run_flow, o.step_flow, w.trace_context,
       COALESCE(CASE WHEN o.step_id IS NOT NULL THEN s.fence
                     WHEN w.loaded_event_count = 0 THEN GREATEST(w.fence - 1, 0)
                     ELSE w.fence END, 0) AS fence
FROM claimed o LEFT JOIN history.workflows w USING (workflow_id)
LEFT JOIN history.step_tasks s ON s.workflow_id = o.workflow_id AND s.step_id = o.step_id
ORDER BY o.id
"""


class OutboxRelay(BackgroundLoop):
    """Sends outbox rows to the scheduler, deleting them in a transaction that commits once it
    has acknowledged them.

    A request survives any crash: its delete commits only after the scheduler's answer, so a
    crash in between sends it again, which the scheduler's idempotent enqueue absorbs.
    Stopped, what is left stays in the outbox for the next start.

    A request committed while a batch is under way is relayed at once by an extra batch (at
    most EXTRA_BATCHES beside the loop's). The batches of this relay keep each workflow's
    requests in order: a batch claims no row of a workflow another batch has claimed and not
    yet committed (claims are made one at a time), and the loop looks again once that batch
    is done.
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
        self._claiming = asyncio.Lock()
        self._claimed: set[str] = set()  # the workflows of the batches under way
        self._passed_over = False  # a claim left out some of them: look again after
        self._under_way = 0  # batches between their claim and their commit
        self._extras: set[asyncio.Task[None]] = set()
        # After a batch failed, until one succeeds: no extra batches (the scheduler may be
        # down, and the loop retries at its pace).
        self._failing = False

    def notify(self) -> None:
        """Relay soon: a transaction with outbox rows just committed."""
        if self._under_way and not self._failing and len(self._extras) < EXTRA_BATCHES:
            extra = asyncio.create_task(self._extra_batch(), name="outbox relay, extra batch")
            self._extras.add(extra)
            extra.add_done_callback(self._extras.discard)
        else:
            self._relay_soon.set()

    async def stop(self) -> None:
        """Stop the loop and any extra batch under way (their rows stay in the outbox)."""
        for extra in list(self._extras):
            extra.cancel()
        await asyncio.gather(*self._extras, return_exceptions=True)
        await super().stop()

    async def relay(self) -> None:
        """Relay everything in the outbox now, a batch at a time."""
        while await self._relay_batch() == BATCH:
            pass

    async def _extra_batch(self) -> None:
        """One batch beside the loop's, a failure logged as the loop's are; what it leaves is
        the loop's (now, or at its poll)."""
        await self.run_round(self._one_extra_batch)

    async def _one_extra_batch(self) -> None:
        if await self._relay_batch() == BATCH:
            self._relay_soon.set()

    async def _relay_batch(self) -> int:
        self._under_way += 1
        workflows: set[str] = set()
        try:
            async with self._pool.connection() as conn, conn.transaction():
                async with self._claiming:
                    self._passed_over |= bool(self._claimed)
                    with untraced():  # the poll runs every second; only a relay is worth a trace
                        rows = await fetch_all(conn, CLAIM_OUTBOX, [list(self._claimed), BATCH])
                    workflows = {row["workflow_id"] for row in rows}
                    self._claimed |= workflows
                if rows:
                    await self._send(rows)
            self._failing = False
            return len(rows)
        except Exception:
            self._failing = True
            raise
        finally:
            self._under_way -= 1
            self._claimed -= workflows
            if workflows and self._passed_over:
                self._passed_over = False
                self._relay_soon.set()  # what a claim left out for this batch's sake

    async def _send(self, rows: list[Row]) -> None:
        """Hand the claimed rows to the scheduler (their delete commits after, by the caller)."""
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
                flow=task_flow(row["run_flow"], row["step_flow"], row["step_id"] or ""),
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
