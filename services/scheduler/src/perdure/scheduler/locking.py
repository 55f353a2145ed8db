"""Key-order locking: how a statement that changes several tasks takes their row locks."""

from __future__ import annotations


# Every statement that changes several tasks first locks them in key order (workflow id, step
# id), as ENQUEUE inserts them: two such statements, or transactions made of them, then never
# wait on each other in a cycle (PostgreSQL would end one with a deadlock error, and with it a
# worker's stream and the TaskDones on their way). CLAIM skips locked rows and never waits.
def in_key_order(rows: str) -> str:
    """A CTE `locked` of the task keys `rows` (a FROM ... WHERE ... over `scheduler.tasks t`)
    selects, locked in key order."""
    return f"""locked AS (
    SELECT t.workflow_id, t.step_id {rows}
    ORDER BY t.workflow_id, t.step_id
    FOR UPDATE OF t
)"""


LOCKED = "t.workflow_id = locked.workflow_id AND t.step_id = locked.step_id"

# Locks every task of these runs, in key order, for a transaction that changes several.
LOCK_RUNS = """
SELECT 1 FROM scheduler.tasks WHERE workflow_id = ANY(%s::text[])
ORDER BY workflow_id, step_id FOR UPDATE
"""
