"""A task's flow settings, stored with it by the request that creates it (a run's start, a
remote step's call), its queue's fairness keys registered, and a run's own budget set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from perdure.scheduler.model import DueTask

# Only for the run the request is for: a late request of an older run changes nothing (ENQUEUE
# cleared the settings when a newer run took the task over).
SET_FLOW = """
UPDATE scheduler.tasks t
SET flow = g.flow, flow_namespace = g.flow->>'namespace',
    flow_keys = ARRAY(SELECT jsonb_array_elements_text(g.flow->'keys')),
    priority = g.priority, fairness_key = g.fairness_key
FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::jsonb[], %s::smallint[], %s::text[])
     AS g(workflow_id, step_id, run_number, flow, priority, fairness_key)
WHERE t.workflow_id = g.workflow_id AND t.step_id = g.step_id AND t.run_number = g.run_number
"""
# A queue with flow tasks is claimed by the flow claim, which walks its fairness keys: '' (the
# tasks without one) is among them.
REGISTER_FAIRNESS = """
INSERT INTO scheduler.fairness (task_queue, fairness_key)
SELECT DISTINCT * FROM unnest(%s::text[], %s::text[])
ORDER BY 1, 2
ON CONFLICT DO NOTHING
"""
# A run's budget comes with its start, sent again when the outbox relays it twice: only a newer
# run of the workflow id starts a budget afresh.
SET_RUN_BUDGET = """
INSERT INTO scheduler.budgets
    (namespace, scope, name, limit_units, limit_cost, period, run_number)
VALUES (%s, 'run', %s, %s, %s, 'none', %s)
ON CONFLICT (namespace, scope, name) DO UPDATE
SET limit_units = EXCLUDED.limit_units, limit_cost = EXCLUDED.limit_cost,
    run_number = EXCLUDED.run_number, reserved_units = 0, reserved_cost = 0, spent_units = 0,
    spent_cost = 0, refusals = 0, updated_at = now()
WHERE scheduler.budgets.run_number < EXCLUDED.run_number
"""


async def store_flow(conn: AsyncConnection[Any], tasks: Sequence[DueTask]) -> None:
    """Store the flow settings the tasks bring (in the transaction that made them due)."""
    flowing = [t for t in tasks if t.flow is not None]
    if not flowing:
        return
    rows = [(t, t.flow) for t in flowing if t.flow is not None]
    await conn.execute(
        SET_FLOW,
        [
            [t.workflow_id for t, _ in rows],
            [t.step_id for t, _ in rows],
            [t.run_number for t, _ in rows],
            [Jsonb(f.to_json()) for _, f in rows],
            [f.priority for _, f in rows],
            [f.fairness_key for _, f in rows],
        ],
    )
    pairs = sorted(
        {(t.task_queue, f.fairness_key) for t, f in rows} | {(t.task_queue, "") for t, _ in rows}
    )
    await conn.execute(REGISTER_FAIRNESS, [[q for q, _ in pairs], [k for _, k in pairs]])
    for task, flow in rows:
        if task.run_budget is not None:
            budget = task.run_budget
            await conn.execute(
                SET_RUN_BUDGET,
                [flow.namespace, task.workflow_id, budget.units, budget.cost, task.run_number],
            )
