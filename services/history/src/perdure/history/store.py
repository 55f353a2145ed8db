"""SQL for the history schema. Functions named *_txn run inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

Row = dict[str, Any]

WORKFLOW_COLUMNS = (
    "workflow_id, workflow_type, task_queue, status, input, result, failure, fence,"
    " event_count, created_at, updated_at, closed_at"
)
EVENT_COLUMNS = (
    "event_id, event_type, fence, step_id, step_name, position, attempt, payload, failure,"
    " created_at"
)

# A start is one statement: the run, its WorkflowStarted event and its scheduling request are
# written together, or, when the id is taken, none of them.
START_WORKFLOW = """
WITH run AS (
    INSERT INTO history.workflows
        (workflow_id, workflow_type, task_queue, status, input, event_count)
    VALUES (%(workflow_id)s, %(workflow_type)s, %(task_queue)s, 'RUNNING', %(input)s, 1)
    ON CONFLICT (workflow_id) DO NOTHING
    RETURNING workflow_id, workflow_type, task_queue, input
), started AS (
    INSERT INTO history.events (workflow_id, event_id, event_type, fence, payload)
    SELECT workflow_id, 1, 'WORKFLOW_STARTED', 0, input FROM run
), scheduled AS (
    INSERT INTO history.outbox (workflow_id, workflow_type, task_queue)
    SELECT workflow_id, workflow_type, task_queue FROM run
)
SELECT workflow_id FROM run
"""

SELECT_WORKFLOW = f"SELECT {WORKFLOW_COLUMNS} FROM history.workflows WHERE workflow_id = %s"

# Raising the fence mark and taking the row lock happen in one statement: a lower fence
# matches no row, so a stale holder can never reach the write that follows.
ADVANCE_FENCE = f"""
UPDATE history.workflows SET fence = %(fence)s
WHERE workflow_id = %(workflow_id)s AND fence <= %(fence)s
RETURNING {WORKFLOW_COLUMNS}
"""

# Appending to a running workflow is one statement: the fenced UPDATE reserves the next event
# id and the INSERT writes the event from it. A stale fence or a closed run matches no row, so
# nothing is written; a step id or position already taken raises UniqueViolation and the whole
# statement, the UPDATE included, is undone. One round trip per step.
_APPEND_EVENT = """
INSERT INTO history.events (workflow_id, event_id, event_type, fence, step_id, step_name,
                            position, attempt, payload, failure)
SELECT workflow_id, event_count, %(event_type)s, %(fence)s, %(step_id)s, %(step_name)s,
       %(position)s, %(attempt)s, %(payload)s, %(failure)s
FROM appended
RETURNING event_id
"""

RECORD_STEP = (
    """
WITH appended AS (
    UPDATE history.workflows
    SET fence = %(fence)s, event_count = event_count + 1, updated_at = now()
    WHERE workflow_id = %(workflow_id)s AND fence <= %(fence)s AND status = 'RUNNING'
    RETURNING workflow_id, event_count
)"""
    + _APPEND_EVENT
)

CLOSE_RUN = (
    """
WITH appended AS (
    UPDATE history.workflows
    SET fence = %(fence)s, event_count = event_count + 1, updated_at = now(),
        status = %(status)s, result = %(payload)s, failure = %(failure)s, closed_at = now()
    WHERE workflow_id = %(workflow_id)s AND fence <= %(fence)s AND status = 'RUNNING'
    RETURNING workflow_id, event_count
)"""
    + _APPEND_EVENT
)

SELECT_STEP_EVENT = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND (step_id = %(step_id)s OR position = %(position)s)
"""

SELECT_EVENTS = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND event_id > %(after)s
ORDER BY event_id
LIMIT %(limit)s
"""

SELECT_STEP_EVENTS = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %s AND position IS NOT NULL
ORDER BY position
"""

LIST_WORKFLOWS = f"""
SELECT run_seq, {WORKFLOW_COLUMNS} FROM history.workflows
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(workflow_type)s::text IS NULL OR workflow_type = %(workflow_type)s)
  AND (%(before)s::bigint IS NULL OR run_seq < %(before)s)
ORDER BY run_seq DESC
LIMIT %(limit)s
"""

# SKIP LOCKED lets several history replicas relay side by side; a request relayed twice is
# harmless because the scheduler's enqueue is idempotent.
CLAIM_OUTBOX = """
SELECT id, workflow_id, workflow_type, task_queue, run_at FROM history.outbox
ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""

DELETE_OUTBOX = "DELETE FROM history.outbox WHERE id = ANY(%s)"


def json_or_none(value: Any) -> Jsonb | None:
    """Wrap a value for a jsonb column; None stays SQL NULL."""
    return None if value is None else Jsonb(value)


async def fetch_one(conn: AsyncConnection, query: str, params: Any) -> Row | None:
    """Run a query and return its first row as a dict, or None."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone()


async def fetch_all(conn: AsyncConnection, query: str, params: Any) -> list[Row]:
    """Run a query and return every row as a dict."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


# Events whose payload column holds a JSON value (JSON null included).
PAYLOAD_EVENTS = frozenset({"WORKFLOW_STARTED", "STEP_COMPLETED", "WORKFLOW_COMPLETED"})


def event_params(
    *,
    workflow_id: str,
    event_type: str,
    fence: int,
    step_id: str | None = None,
    step_name: str | None = None,
    position: int | None = None,
    attempt: int | None = None,
    payload: Any = None,
    failure: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Parameters of RECORD_STEP and CLOSE_RUN for one event."""
    return {
        "workflow_id": workflow_id,
        "event_type": event_type,
        "fence": fence,
        "step_id": step_id,
        "step_name": step_name,
        "position": position,
        "attempt": attempt,
        "payload": Jsonb(payload) if event_type in PAYLOAD_EVENTS else None,
        "failure": json_or_none(failure),
    }
