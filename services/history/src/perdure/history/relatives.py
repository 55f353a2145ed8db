"""What a run's change owes its relatives, carried out after the change commits.

The trigger of migration 0024 writes a notice in the transaction of the change itself: a child
that closed for good (its outcome goes to its parent's journal, which wakes the parent), a
parent that closed (its open children get their parent-close policy), a parent whose
cancellation was requested (so is its open children's, except those it abandons). Each notice
is carried out in a transaction of its own that deletes it, so it takes effect exactly once,
whatever crashes: a notice is never lost (it commits with the change), never done twice (its
delete commits with its effect). Replicas side by side skip each other's (SKIP LOCKED).

Lock order: a close locks its own run only; a notice locks the parent alone (a child's
outcome) or the children alone, in key order (a policy, a cancel). No transaction holds a
parent and waits for its child's row while another holds that child and waits for the parent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg_pool import AsyncConnectionPool

from perdure.common import namespaces
from perdure.common.background import BackgroundLoop
from perdure.common.text import printable
from perdure.history import store
from perdure.history.fencing import OPEN
from perdure.history.metrics import count_closed
from perdure.history.model import EventType, ParentClosePolicy, RunStatus
from perdure.history.rows import Row, fetch_all, fetch_one
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # the safety net: a change committed by another replica, or before a crash

CLAIM_NOTICE = """
SELECT id, kind, chain_id, run_id FROM history.child_notices
ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
"""
DELETE_NOTICE = "DELETE FROM history.child_notices WHERE id = %s"

# A closed child's outcome, journaled in its parent's run if that run is open (a parent that
# closed or continued as new takes nothing), with a wake-up of the parent. Its failure says how
# it ended: the child's own (failed, cancelled), else its status.
CHILD_OUTCOME = (
    f"""
WITH child AS (
    SELECT c.chain_id AS child_id, c.run_id AS child_run, c.status AS child_status,
           c.parent_workflow_id, c.parent_run_id, c.parent_step_id,
           CASE WHEN c.status = 'COMPLETED' THEN '{EventType.CHILD_WORKFLOW_COMPLETED}'
                ELSE '{EventType.CHILD_WORKFLOW_FAILED}' END AS event_type,
           CASE WHEN c.status = 'COMPLETED' THEN c.result END AS payload,
           CASE WHEN c.status = 'COMPLETED' THEN c.result_encoding END AS payload_encoding,
           CASE WHEN c.status <> 'COMPLETED' THEN COALESCE(c.failure, jsonb_build_object(
               'type', 'ChildWorkflow' || initcap(c.status),
               'message', 'the child workflow was ' || lower(c.status),
               'stack_trace', '')) END AS failure
    FROM history.workflows c
    WHERE c.chain_id = %(chain_id)s AND c.run_id = %(run_id)s AND c.parent_workflow_id IS NOT NULL
), appended AS (
    UPDATE history.workflows w
    SET {store.count_event(store.event_values(payload="child.payload", failure="child.failure"))}
    FROM child
    WHERE w.chain_id = child.parent_workflow_id AND w.run_id = child.parent_run_id
      AND w.status IN {OPEN}
    RETURNING w.workflow_id, w.workflow_type, w.task_queue, w.event_count, w.run_number, w.part,
              child.*
)"""
    + store.insert_event(
        store.event_values(
            event_type="appended.event_type",
            fence="0",
            step_id="appended.parent_step_id",
            payload="appended.payload",
            payload_encoding="appended.payload_encoding",
            failure="appended.failure",
            name="appended.child_status",
            child_workflow_id="appended.child_id",
            child_run_id="appended.child_run",
        )
    )
    + """, scheduled AS (
    INSERT INTO history.outbox (workflow_id, workflow_type, task_queue, run_number)
    SELECT workflow_id, workflow_type, task_queue, run_number FROM appended
)
SELECT appended.workflow_id FROM appended
"""
)

# A run's open children (the latest run of each child chain it started), in key order.
OPEN_CHILDREN = f"""
SELECT workflow_id, parent_close_policy FROM history.workflows
WHERE parent_workflow_id = %(chain_id)s AND parent_run_id = %(run_id)s AND status IN {OPEN}
ORDER BY workflow_id
"""

SELECT_RUN = """
SELECT chain_id, run_id, status FROM history.workflows WHERE chain_id = %s AND run_id = %s
"""


class Relatives(BackgroundLoop):
    """Carries out the notices of closes and cancel requests (see the module's doc)."""

    def __init__(self, pool: AsyncConnectionPool, on_scheduled: Callable[[], None]) -> None:
        self._soon = asyncio.Event()
        super().__init__("relatives", self.drain, POLL_SECONDS, wake=self._soon)
        self._pool = pool
        self._on_scheduled = on_scheduled  # wakes the outbox relay

    def notify(self) -> None:
        """Look soon: a change that may owe its relatives something committed."""
        self._soon.set()

    async def drain(self) -> None:
        """Carry out every notice there is, one transaction each."""
        with untraced():  # the poll runs all the time
            while await self.carry_out_one():
                self._on_scheduled()

    async def carry_out_one(self) -> bool:
        """Carry out the oldest notice no other replica holds; False when there is none."""
        async with self._pool.connection() as conn, conn.transaction():
            notice = await fetch_one(conn, CLAIM_NOTICE, None)
            if notice is None:
                return False
            if notice["kind"] == "child_closed":
                await _tell_parent(conn, notice)
            else:
                await _reach_children(conn, notice)
            await conn.execute(DELETE_NOTICE, [notice["id"]])
        return True


async def _tell_parent(conn: AsyncConnection, notice: Row) -> None:
    """Journal a closed child's outcome in its parent's run, and wake the parent. An outcome
    the parent's journal holds already (the unique index on it) is done: the notice goes."""
    try:
        async with conn.transaction():  # a savepoint: the notice's delete goes on
            row = await fetch_one(conn, CHILD_OUTCOME, notice)
    except UniqueViolation:
        log.warning(
            "child workflow %s: its outcome was journaled already", printable(notice["chain_id"])
        )
        return
    if row is not None:
        log.info(
            "child workflow %s closed: its outcome went to %s",
            printable(notice["chain_id"]),
            printable(row["workflow_id"]),
        )


async def _reach_children(conn: AsyncConnection, notice: Row) -> None:
    """Apply a parent's close (each child's policy) or its cancel request to its open
    children."""
    parent = await fetch_one(conn, SELECT_RUN, [notice["chain_id"], notice["run_id"]])
    status = parent["status"] if parent is not None else "closed"
    public_parent = namespaces.split(notice["chain_id"])[1]
    for child in await fetch_all(conn, OPEN_CHILDREN, notice):
        policy = ParentClosePolicy(child["parent_close_policy"] or ParentClosePolicy.TERMINATE)
        if policy is ParentClosePolicy.ABANDON:
            continue
        if notice["kind"] == "cancel":
            reason = f"its parent workflow {public_parent!r} was asked to cancel"
            await _request_cancel(conn, child["workflow_id"], reason)
        elif policy is ParentClosePolicy.REQUEST_CANCEL:
            reason = f"its parent workflow {public_parent!r} closed ({status.lower()})"
            await _request_cancel(conn, child["workflow_id"], reason)
        else:
            reason = (
                f"its parent workflow {public_parent!r} closed ({status.lower()}); "
                "parent close policy TERMINATE"
            )
            await _terminate(conn, child["workflow_id"], reason)


async def _request_cancel(conn: AsyncConnection, workflow_id: str, reason: str) -> None:
    params = store.event_params(
        workflow_id=workflow_id,
        event_type=EventType.CANCEL_REQUESTED,
        failure={"type": "CancelRequested", "message": reason, "stack_trace": ""},
        wake=True,
    ) | store.audit_params(workflow_id, "", reason)
    await fetch_one(conn, store.REQUEST_CANCEL, params)


async def _terminate(conn: AsyncConnection, workflow_id: str, reason: str) -> None:
    failure = {"type": "Terminated", "message": reason, "stack_trace": ""}
    params = store.event_params(
        workflow_id=workflow_id, event_type=EventType.WORKFLOW_TERMINATED, failure=failure
    )
    closed = await fetch_one(conn, store.TERMINATE_REPLACED, params)
    if closed is not None:
        count_closed(closed["workflow_type"], RunStatus.TERMINATED)
