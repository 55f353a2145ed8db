"""Child workflows: a run's code starts another run (ctx.child), and the two are linked both
ways. The parent's call (CHILD_WORKFLOW_STARTED, positioned like STEP_SCHEDULED) and the
child's run are written in one transaction, so a child is started exactly once however often
the call is sent or replayed. The child's row keeps its parent (chains.start_params' `parent`),
and what its close owes the parent (its outcome) or a parent's close owes its children (their
parent-close policy) is carried out by relatives.py.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, namespaces
from perdure.common.reasons import Reason
from perdure.history import chains, convert, fencing, store
from perdure.history.appends import plain
from perdure.history.chains import Chains, IdReusePolicy
from perdure.history.metrics import count_started, timed_write
from perdure.history.model import Appended, Call, ChildStart, EventType, Parent, sql_list
from perdure.history.rows import Row, fetch_one

# The failure type of a child call whose workflow id is held by an open run.
ALREADY_STARTED = "WorkflowAlreadyStarted"

# The parent run's identity, as its chain and run id name it to its children.
SELECT_PARENT_RUN = "SELECT chain_id, run_id FROM history.workflows WHERE workflow_id = %s"

# The outcome journaled for a child call at once (a child that could not start).
SELECT_CHILD_OUTCOME = f"""
SELECT {store.EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND position IS NULL
  AND event_type = '{EventType.CHILD_WORKFLOW_FAILED}'
"""

# The children a run started, in the order its code started them, each with the status of its
# chain's latest run that is still this parent's child (a child continued as new goes on).
SELECT_CHILDREN = f"""
SELECT e.step_id, e.child_workflow_id, e.child_run_id, e.name AS workflow_type,
       latest.status, latest.parent_close_policy
FROM history.workflows p
JOIN history.events e ON e.workflow_id = p.workflow_id
LEFT JOIN LATERAL (
    SELECT c.status, c.parent_close_policy FROM history.workflows c
    WHERE c.chain_id = e.child_workflow_id AND c.parent_workflow_id = p.chain_id
      AND c.parent_run_id = p.run_id
    ORDER BY c.run_number DESC LIMIT 1
) latest ON true
WHERE p.workflow_id = %s AND e.event_type = '{EventType.CHILD_WORKFLOW_STARTED}'
  AND e.child_run_id IS NOT NULL
ORDER BY e.event_id
"""


# A child's outcome in its parent's journal, as SQL.
_OUTCOMES = sql_list((EventType.CHILD_WORKFLOW_COMPLETED, EventType.CHILD_WORKFLOW_FAILED))

# A reset's new run takes over the children its copy of the source run started (their
# CHILD_WORKFLOW_STARTED is among the events copied) whose outcome the copy does not hold: an
# open child's outcome will go to the new run; a closed one's is owed to it now (a notice,
# carried out as any child's close, relatives.py). The other children stay the source run's.
ADOPT_CHILDREN = f"""
WITH adopted AS (
    UPDATE history.workflows c SET parent_run_id = %(new_run)s
    FROM history.events e
    WHERE e.workflow_id = %(source_key)s AND e.event_id <= %(last)s
      AND e.event_type = '{EventType.CHILD_WORKFLOW_STARTED}' AND e.child_run_id IS NOT NULL
      AND c.chain_id = e.child_workflow_id AND c.parent_workflow_id = %(chain_id)s
      AND c.parent_run_id = %(source_run)s
      AND NOT EXISTS (
          SELECT FROM history.events o
          WHERE o.workflow_id = %(source_key)s AND o.event_id <= %(last)s
            AND o.step_id = e.step_id AND o.position IS NULL
            AND o.event_type IN {_OUTCOMES})
    RETURNING c.chain_id, c.run_id, c.status
)
INSERT INTO history.child_notices (kind, chain_id, run_id)
SELECT 'child_closed', chain_id, run_id FROM adopted
WHERE status NOT IN ('RUNNING', 'WAITING', 'PARKED', 'CONTINUED_AS_NEW')
"""


async def adopt_children(
    conn: AsyncConnection, source: Row, source_key: str, new_run: str, last: int
) -> None:
    """In a reset's transaction: the new run takes over the children its copy of `source` (a
    workflows row, read by its key `source_key`) up to event `last` started and holds no
    outcome of (ADOPT_CHILDREN)."""
    await conn.execute(
        ADOPT_CHILDREN,
        {
            "new_run": new_run,
            "source_key": source_key,
            "last": last,
            "chain_id": source["chain_id"],
            "source_run": source["run_id"],
        },
    )


# The failure type of a child call a fork copied without its outcome.
NOT_FORKED = "ChildNotForked"

# A fork's copy may hold child calls without their outcome: the children stay the source run's
# (a run has one parent), so each such call fails in the fork at once, in the fork's
# transaction, where its replay finds it (ChildWorkflowFailedError, "ChildNotForked").
FAIL_UNFORKED_CHILDREN = (
    f"""
WITH appended AS (
    SELECT w.workflow_id, w.part,
           w.event_count + row_number() OVER (ORDER BY e.event_id) AS event_count, e.step_id,
           e.step_name, e.child_workflow_id, e.child_run_id,
           jsonb_build_object(
               'type', '{NOT_FORKED}',
               'message', 'the fork copied this child call without its outcome: the child '
                   || 'stays the run the fork was made from',
               'stack_trace', '') AS failure
    FROM history.workflows w JOIN history.events e ON e.workflow_id = w.workflow_id
    WHERE w.workflow_id = %(workflow_id)s
      AND e.event_type = '{EventType.CHILD_WORKFLOW_STARTED}'
      AND NOT EXISTS (
          SELECT FROM history.events o
          WHERE o.workflow_id = e.workflow_id AND o.step_id = e.step_id
            AND o.position IS NULL AND o.event_type IN {_OUTCOMES})
)"""
    + store.insert_event(
        store.event_values(
            event_type=f"'{EventType.CHILD_WORKFLOW_FAILED}'",
            fence="0",
            step_id="appended.step_id",
            step_name="appended.step_name",
            failure="appended.failure",
            child_workflow_id="appended.child_workflow_id",
            child_run_id="appended.child_run_id",
        )
    )
    + f"""
UPDATE history.workflows
SET event_count = event_count + (SELECT count(*) FROM inserted),
    history_bytes = history_bytes + (
        SELECT COALESCE(sum({store.EVENT_BYTES} + octet_length(failure::text)), 0)
        FROM appended)
WHERE workflow_id = %(workflow_id)s
"""
)


def child_info(row: Row) -> wf.ChildWorkflow:
    """A SELECT_CHILDREN row as the public API shows it."""
    return wf.ChildWorkflow(
        step_id=row["step_id"],
        workflow_id=namespaces.split(row["child_workflow_id"])[1],
        run_id=row["child_run_id"],
        workflow_type=row["workflow_type"] or "",
        status=f"WORKFLOW_STATUS_{row['status']}" if row["status"] else None,
        parent_close_policy=convert.close_policy(row["parent_close_policy"]),
    )


def already_started(child_workflow_id: str) -> dict[str, str]:
    """The failure of a child call whose workflow id an open run holds."""
    return {
        "type": ALREADY_STARTED,
        "message": (
            f"workflow id {namespaces.split(child_workflow_id)[1]!r} is held by an open run: "
            "no child was started; give the child another id, or wait for that run"
        ),
        "stack_trace": "",
    }


class Children(Chains):
    """Starting child workflows."""

    async def start_child(
        self, call: Call, child: ChildStart
    ) -> tuple[Appended, str, dict[str, str] | None]:
        """Journal the parent's call and start the child's run, in one transaction: (the
        call's append, the child's run id, the failure journaled when none started). The same
        call sent again starts nothing and answers like the first; another call at that step
        id or position is STEP_CONFLICT."""
        started = store.event_params(
            workflow_id=call.workflow_id,
            fence=call.fence,
            lease_key=call.lease.key,
            event_type=EventType.CHILD_WORKFLOW_STARTED,
            step_id=call.step_id,
            step_name=call.step_name,
            position=call.position,
            payload=child.input_value,
            name=child.workflow_type,
            task_queue=child.task_queue,
            child_workflow_id=child.workflow_id,
        )
        async with self._pool.connection() as conn:
            recorded = await self._recorded_child(conn, call, started)
            if recorded is not None:
                return recorded
            try:
                answer = await self._start_child(conn, call, child, started)
            except UniqueViolation:  # the same call, committed meanwhile
                again = await self._recorded_child(conn, call, started)
                if again is None:
                    raise
                return again
        self._on_committed(call.workflow_id, False)
        self._on_scheduled()  # the child's first task, if it started
        if answer[1]:
            count_started(child.workflow_type)
        return answer

    async def _start_child(
        self, conn: AsyncConnection, call: Call, child: ChildStart, started: dict[str, Any]
    ) -> tuple[Appended, str, dict[str, str] | None]:
        """In one transaction: the child's run (a new run of its id when its last one is
        closed), then the parent's call under its lease, with CHILD_WORKFLOW_FAILED at once
        when an open run holds the id."""
        async with conn.transaction():
            parent = await fetch_one(conn, SELECT_PARENT_RUN, [call.workflow_id])
            if parent is None:
                raise fencing.run_not_found(call.workflow_id)
            params = chains.start_params(
                child.workflow_id,
                child.workflow_type,
                child.task_queue,
                child.input_value,
                run_id=chains.new_run_id(),
                parent=Parent(
                    parent["chain_id"], parent["run_id"], call.step_id, child.close_policy
                ),
            )
            run_id = await self._child_run(conn, params)
            started["child_run_id"] = run_id
            with timed_write("child_workflow_started"):
                row = await fetch_one(conn, store.START_CHILD, started)
            if row is None:
                raise await fencing.rejection(conn, call.lease)
            failure = None
            if run_id is None:
                failure = already_started(child.workflow_id)
                outcome = store.event_params(
                    workflow_id=call.workflow_id,
                    fence=call.fence,
                    lease_key=call.lease.key,
                    event_type=EventType.CHILD_WORKFLOW_FAILED,
                    step_id=call.step_id,
                    step_name=call.step_name,
                    failure=failure,
                    child_workflow_id=child.workflow_id,
                )
                await fetch_one(conn, store.START_CHILD, outcome)
        appended = Appended(row["event_id"], None, row["cancel_requested"])
        return appended, run_id or "", failure

    async def _child_run(self, conn: AsyncConnection, params: dict[str, Any]) -> str | None:
        """Start the child's run (start_params) in the caller's transaction: its run id, or
        None when an open run holds the id. A closed one is followed by a new run."""
        created = await fetch_one(conn, store.START_WORKFLOW, params)
        while created is None:
            again = await self.start_again(conn, params, IdReusePolicy.ALLOW)
            if isinstance(again, tuple):
                return again[2]
            if again is not None:
                return None  # its last run is open
            created = await fetch_one(conn, store.START_WORKFLOW, params)
        return str(params["run_id"])

    async def _recorded_child(
        self, conn: AsyncConnection, call: Call, started: dict[str, Any]
    ) -> tuple[Appended, str, dict[str, str] | None] | None:
        """The answer of this call if the journal holds it already (a request sent again); None
        if nothing is recorded there; STEP_CONFLICT if something else is."""
        keys = {"workflow_id": call.workflow_id, "step_id": call.step_id, "position": call.position}
        row = await fetch_one(conn, store.SELECT_STEP_EVENT, keys)
        if row is None:
            return None
        same = all(
            row[column] == plain(started[column])
            for column in ("step_id", "position", "event_type", "payload", "payload_encoding")
        ) and (row["name"], row["child_workflow_id"]) == (
            started["name"],
            started["child_workflow_id"],
        )
        if not same:
            raise errors.failed_precondition(
                Reason.STEP_CONFLICT,
                f"workflow {call.workflow_id!r} already recorded something different for step "
                f"{call.step_id!r} or position {call.position}; replay the journal instead of "
                "re-running the call",
            )
        failure = None
        if row["child_run_id"] is None:
            outcome = await fetch_one(conn, SELECT_CHILD_OUTCOME, keys)
            failure = outcome["failure"] if outcome is not None else None
        return Appended(row["event_id"], None, False), row["child_run_id"] or "", failure
