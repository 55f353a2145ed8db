"""Due tasks: a task made due (at its time, for its reason), a closed run's tasks retired, and
when the next one is due. Time is always the database's clock, never a process's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import transaction_if
from perdure.scheduler.debounce import DELAY_UNGRANTED, delay_columns
from perdure.scheduler.flow.tasks import store_flow
from perdure.scheduler.locking import LOCK_RUNS, LOCKED, in_key_order
from perdure.scheduler.model import DueReason, DueTask

TIMER = f"'{DueReason.TIMER}'"  # as SQL: a timer's due time may be granted ahead


def grantable_at(sticky_ids: str) -> str:
    """SQL: when an unleased task of `scheduler.tasks` becomes grantable to the sessions whose
    sticky ids the text array `sticky_ids` holds: its due time (a timer's `timer_lookahead`
    early), or, when another worker keeps its run, its due time plus the sticky timeout."""
    return f"""CASE
        WHEN sticky_id IS NOT NULL AND NOT sticky_id = ANY({sticky_ids})
        THEN run_at + make_interval(secs => %(sticky_timeout)s)
        WHEN due_reason = {TIMER} THEN run_at - make_interval(secs => %(timer_lookahead)s)
        ELSE run_at END"""


# A task is a workflow's own (step_id '') or one of its remote steps' (step_id set, and
# workflow_type holding the step type). One statement for a whole batch. LEAST ignores NULL,
# so an earlier due time always wins and a request is never lost; the reason of the winning
# due time comes with it (SET sees the row as it was). A batch naming a task twice keeps its
# earliest request; rows are locked in key order, so concurrent batches cannot deadlock. The
# fence counter never falls below the floor history sends (the run's fence mark), so the next
# grant is always above the mark. A closed task stays closed: never due again, for its run.
# A workflow id names a chain of runs (history's run_number): a request for a newer run than the
# task's is the first of that run, which reopens the task and sets its due time and type (a
# step id of the new run may be one the old run used); a late one for an older run changes
# nothing. The fence counter is never reset, so no lease of an older run is granted again; the
# build a run was started by is the old run's, so a newer run has none yet, nor its flow
# settings (a request that brings them stores them next: flow/tasks.py).
ENQUEUE = """
INSERT INTO scheduler.tasks
    (workflow_id, step_id, workflow_type, task_queue, run_at, due_reason, trace_context, fence,
     run_number)
SELECT DISTINCT ON (workflow_id, step_id) workflow_id, step_id, workflow_type, task_queue,
       COALESCE(run_at, now()), due_reason, trace_context, fence_floor, run_number
FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::text[],
            %s::jsonb[], %s::bigint[], %s::bigint[])
     AS t(workflow_id, step_id, workflow_type, task_queue, run_at, due_reason, trace_context,
          fence_floor, run_number)
ORDER BY workflow_id, step_id, run_number DESC, COALESCE(run_at, now())
ON CONFLICT (workflow_id, step_id) DO UPDATE
SET run_at = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN EXCLUDED.run_at
                  WHEN EXCLUDED.run_number < scheduler.tasks.run_number
                    OR scheduler.tasks.closed THEN scheduler.tasks.run_at
                  ELSE LEAST(scheduler.tasks.run_at, EXCLUDED.run_at) END,
    due_reason = CASE
        WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN EXCLUDED.due_reason
        WHEN EXCLUDED.run_number < scheduler.tasks.run_number THEN scheduler.tasks.due_reason
        WHEN scheduler.tasks.run_at IS NULL OR EXCLUDED.run_at < scheduler.tasks.run_at
        THEN EXCLUDED.due_reason ELSE scheduler.tasks.due_reason END,
    closed = scheduler.tasks.closed AND EXCLUDED.run_number <= scheduler.tasks.run_number,
    workflow_type = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number
                         THEN EXCLUDED.workflow_type ELSE scheduler.tasks.workflow_type END,
    task_queue = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number
                      THEN EXCLUDED.task_queue ELSE scheduler.tasks.task_queue END,
    build_id = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN NULL
                    ELSE scheduler.tasks.build_id END,
    run_number = GREATEST(scheduler.tasks.run_number, EXCLUDED.run_number),
    trace_context = COALESCE(EXCLUDED.trace_context, scheduler.tasks.trace_context),
    flow = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN NULL
                ELSE scheduler.tasks.flow END,
    flow_namespace = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN NULL
                          ELSE scheduler.tasks.flow_namespace END,
    flow_keys = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN '{}'
                     ELSE scheduler.tasks.flow_keys END,
    priority = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN 3
                    ELSE scheduler.tasks.priority END,
    fairness_key = CASE WHEN EXCLUDED.run_number > scheduler.tasks.run_number THEN ''
                        ELSE scheduler.tasks.fairness_key END,
    fence = GREATEST(scheduler.tasks.fence, EXCLUDED.fence),
    updated_at = now()
"""

# Retires every task of closed runs (run_at NULL, never due again); a lease under way ends as
# it would have, and its release leaves the task as it is. A task a newer run of the workflow
# id took over is not the closed run's.
_CLOSED_RUNS = """FROM scheduler.tasks t
    JOIN unnest(%s::text[], %s::bigint[]) AS c(workflow_id, run_number)
      ON t.workflow_id = c.workflow_id AND t.run_number <= c.run_number"""
CLOSE = f"""
WITH {in_key_order(_CLOSED_RUNS)}
UPDATE scheduler.tasks t
SET closed = true, run_at = NULL, due_reason = NULL, updated_at = now()
FROM locked WHERE {LOCKED}
"""

# A resumed run's tasks (its own, and those of its remote steps without an outcome), closed
# when the run parked, open again for that very run (the ENQUEUE after it makes them due); one
# a newer run of the workflow id took over is not its.
_REOPENED_RUNS = """FROM scheduler.tasks t
    JOIN unnest(%s::text[], %s::text[], %s::bigint[]) AS r(workflow_id, step_id, run_number)
      ON t.workflow_id = r.workflow_id AND t.step_id = r.step_id
     AND t.run_number = r.run_number
    WHERE t.closed"""
REOPEN = f"""
WITH {in_key_order(_REOPENED_RUNS)}
UPDATE scheduler.tasks t SET closed = false, updated_at = now()
FROM locked WHERE {LOCKED}
"""

# Seconds until the next task of these queues becomes grantable to the ready sessions (a due
# time, less the timer lookahead for a timer, plus the sticky timeout for a run another worker
# keeps; or a lease expiry); negative when one is overdue, NULL when none is.
NEXT_DUE = f"""
SELECT EXTRACT(EPOCH FROM min(due) - now())::float8 FROM (
    SELECT min({grantable_at("%(sticky_ids)s::text[]")}) AS due
    FROM scheduler.tasks
    WHERE task_queue = ANY(%(queues)s) AND lease_owner IS NULL AND run_at IS NOT NULL
    UNION ALL
    SELECT min(lease_expires_at) FROM scheduler.tasks
    WHERE task_queue = ANY(%(queues)s) AND lease_owner IS NOT NULL
) AS next
"""

# Of the runs asked about, those whose own task is neither leased nor due (or has no row).
IDLE_RUNS = """
SELECT asked.workflow_id FROM unnest(%s::text[]) AS asked(workflow_id)
WHERE NOT EXISTS (
    SELECT 1 FROM scheduler.tasks t
    WHERE t.workflow_id = asked.workflow_id AND t.step_id = '' AND NOT t.closed
      AND (t.lease_owner IS NOT NULL OR t.run_at IS NOT NULL)
)
"""


def _columns(tasks: list[DueTask]) -> list[list[Any]]:
    """Tasks as the columns ENQUEUE's `unnest` reads, in its order."""
    return [
        [t.workflow_id for t in tasks],
        [t.step_id for t in tasks],
        [t.task_type for t in tasks],
        [t.task_queue for t in tasks],
        [t.run_at for t in tasks],
        [None if t.due_reason is None else t.due_reason.value for t in tasks],
        [None if t.trace_context is None else Jsonb(t.trace_context) for t in tasks],
        [t.fence_floor for t in tasks],
        [t.run_number for t in tasks],
    ]


class Due:
    """Making tasks due and retiring closed runs' tasks."""

    _pool: AsyncConnectionPool

    async def enqueue(self, tasks: list[DueTask], closed: Sequence[tuple[str, int]] = ()) -> None:
        """Make tasks due at their time (now when None), a resumed run's closed task open
        first, then retire every task of the `closed` runs (workflow id, run number), in one
        transaction (or in one statement, atomic alone)."""
        reopened = [task for task in tasks if task.reopens]
        flowing = any(task.flow is not None for task in tasks)
        delayed = delay_columns(tasks)
        several = bool(tasks) and bool(closed or reopened or flowing or delayed[0])
        async with self._pool.connection() as conn, transaction_if(conn, several):
            if several:  # all their locks first
                runs = sorted({task.workflow_id for task in tasks} | {c[0] for c in closed})
                await conn.execute(LOCK_RUNS, [runs])
            if reopened:
                columns = [[t.workflow_id, t.step_id, t.run_number] for t in reopened]
                await conn.execute(REOPEN, [list(column) for column in zip(*columns, strict=True)])
            if tasks:
                await conn.execute(ENQUEUE, _columns(tasks))
                await store_flow(conn, tasks)
            if delayed[0]:
                await conn.execute(DELAY_UNGRANTED, delayed)
            if closed:
                await conn.execute(CLOSE, [[c[0] for c in closed], [c[1] for c in closed]])

    async def idle_runs(self, workflow_ids: list[str]) -> list[str]:
        """Those of the runs whose own task is neither leased nor due."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(IDLE_RUNS, [workflow_ids])
            return [str(row[0]) for row in await cur.fetchall()]

    async def next_due(
        self,
        queues: list[str],
        timer_lookahead: float = 0.0,
        sticky_ids: Sequence[str] = (),
        sticky_timeout: float = 0.0,
    ) -> float | None:
        """Seconds until the next task of `queues` is grantable to sessions of the workers
        `sticky_ids` (<= 0: overdue; None: none)."""
        params = {
            "queues": queues,
            "timer_lookahead": timer_lookahead,
            "sticky_ids": list(sticky_ids),
            "sticky_timeout": sticky_timeout,
        }
        async with self._pool.connection() as conn:
            cur = await conn.execute(NEXT_DUE, params)
            row = await cur.fetchone()
        return None if row is None or row[0] is None else float(row[0])
