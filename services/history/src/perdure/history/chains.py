"""Run chains: a workflow id names a chain of runs, one open at a time, each with its own run
id and journal. A new run of the id (a start that reuses it under its IdReusePolicy, or the
code's continue_as_new) archives the run before it and takes its place, in one transaction.

The latest run keeps the key every table uses (the qualified workflow id), so no handler,
task or worker call changes. The run before it is re-keyed to ARCHIVED ('@~' || run_id: public
ids never start with '@', namespaces never with '~'), and the foreign keys' ON UPDATE CASCADE
move its journal with it; `chain_id` keeps its workflow id. The new run's fence mark is one
above its predecessor's: a fence nobody loaded, so no holder of a lease of an earlier run can
write into it, or load it (the scheduler's counter, per workflow id and never reset, grants
the next lease above).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import IntEnum
from typing import Any

from psycopg import AsyncConnection

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common import errors, namespaces
from perdure.common.reasons import Reason
from perdure.history import store
from perdure.history.appends import JournalBase
from perdure.history.model import (
    NO_PARENT,
    OPEN_STATUSES,
    EventType,
    Parent,
    RunStatus,
    StartKeys,
)
from perdure.history.rows import Row, fetch_one, json_or_none, payload_columns, payload_in
from perdure.telemetry.propagation import current_carrier

ARCHIVED = store.ARCHIVE_KEY.format(run_id="run_id")  # the key of a run a newer one replaced

# The latest run of a workflow id, its row locked: a new run of the id is made under the lock,
# and a signal or a close waiting for it then finds the run that holds the key.
LOCK_LATEST = """
SELECT workflow_id, run_id, run_number, fence, status, workflow_type, task_queue, input,
       input_encoding, deadline, request_id, flow, singleton_key, parent_workflow_id,
       parent_run_id, parent_step_id, parent_close_policy
FROM history.workflows WHERE workflow_id = %s FOR UPDATE
"""

# The run of a chain that a start with this request id made.
SELECT_REQUESTED = """
SELECT run_id, status FROM history.workflows WHERE chain_id = %s AND request_id = %s
"""

# A run of a chain by its run id; its key (the workflow id, or its archive key).
SELECT_RUN_KEY = "SELECT workflow_id FROM history.workflows WHERE chain_id = %s AND run_id = %s"

# The run a lease of this fence continued as new (a FinishWorkflow sent again finds it there).
SELECT_CONTINUED = """
SELECT fence, fence_key, status, result, result_encoding, failure FROM history.workflows
WHERE chain_id = %s AND fence = %s AND status = 'CONTINUED_AS_NEW'
"""

ARCHIVE = f"""
UPDATE history.workflows SET workflow_id = {ARCHIVED}, next_run_id = %(next_run_id)s
WHERE workflow_id = %(workflow_id)s
"""

# The signals the archived run received (from event %(carry_from)s on) and did not consume
# (before event %(consumed_before)s; NULL: ever), journaled again in the new run in their order
# (each `appended` row one of them, its event id after the run's last), with their signal ids
# (a signal sent again is still received once) and trace; one whose signal id the new run
# holds already is not carried twice. A reset (recovery.py) carries those received after its
# cut, consumed there or not.
CARRY_SIGNALS = (
    f"""
WITH appended AS (
    SELECT w.workflow_id, w.part,
           w.event_count + row_number() OVER (ORDER BY s.event_id) AS event_count,
           s.name, s.payload_encoding, s.payload_sha256, s.signal_id, s.trace_context,
           COALESCE(s.payload, (SELECT p.data FROM history.payloads p
                                WHERE p.sha256 = s.payload_sha256)) AS payload
    FROM history.events s, history.workflows w
    WHERE s.workflow_id = {store.ARCHIVE_KEY.format(run_id="%(archived_run)s::text")}
      AND s.event_type = '{EventType.SIGNAL_RECEIVED}'
      AND w.workflow_id = %(workflow_id)s AND s.event_id >= %(carry_from)s
      AND (s.signal_id IS NULL OR NOT EXISTS (
          SELECT FROM history.events e
          WHERE e.workflow_id = w.workflow_id AND e.signal_id = s.signal_id))
      AND NOT EXISTS (SELECT FROM history.signal_consumptions c
                      WHERE c.workflow_id = s.workflow_id AND c.event_id = s.event_id
                        AND (%(consumed_before)s::bigint IS NULL
                             OR c.consumed_by < %(consumed_before)s))
)"""
    + store.insert_event(
        store.event_values(
            event_type=f"'{EventType.SIGNAL_RECEIVED}'",
            fence="0",
            name="appended.name",
            payload="appended.payload",
            payload_encoding="appended.payload_encoding",
            payload_sha256="appended.payload_sha256",
            signal_id="appended.signal_id",
            trace_context="appended.trace_context",
        )
    )
    + """
UPDATE history.workflows
SET event_count = event_count + (SELECT count(*) FROM inserted),
    history_bytes = history_bytes + (
        SELECT COALESCE(sum("""
    + str(store.EVENT_BYTES)
    + """ + octet_length(payload)), 0)
        FROM appended)
WHERE workflow_id = %(workflow_id)s
"""
)


class IdReusePolicy(IntEnum):
    """What a start does when its workflow id's last run is closed (the proto's enum)."""

    UNSPECIFIED = 0
    REFUSE = 1
    ALLOW = 2
    ALLOW_IF_FAILED = 3

    def allows(self, closed: RunStatus) -> bool:
        """Whether a start may make a new run after a last run closed as `closed`."""
        if self is IdReusePolicy.ALLOW:
            return True
        return self is IdReusePolicy.ALLOW_IF_FAILED and closed in _FAILED


# The closes ALLOW_IF_FAILED starts again after.
_FAILED = frozenset({RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TERMINATED, RunStatus.PARKED})


def new_run_id() -> str:
    return str(uuid.uuid4())


def start_params(
    workflow_id: str,
    workflow_type: str,
    task_queue: str,
    input_value: Payload,
    *,
    run_id: str,
    execution_timeout: float | None = None,
    request_id: str | None = None,
    deadline: datetime | None = None,
    flow: bytes | None = None,
    keys: StartKeys | None = None,
    parent: Parent | None = None,
) -> dict[str, Any]:
    """START_WORKFLOW's parameters for the first run of the id (following() makes them the
    next run's). A run ends by `deadline` if given (a continued run keeps its chain's), else
    `execution_timeout` seconds after its start (None: never). `flow`: its flow settings (a
    serialized RunFlow; a run that follows another keeps them). `keys`: a debounced or
    singleton start's (start_keys.py). `parent`: a child's link to the run that started it
    (children.py)."""
    return {
        "workflow_id": workflow_id,
        "run_id": run_id,
        "run_number": 1,
        "previous_run_id": None,
        "fence": 0,
        "request_id": request_id,
        "namespace": namespaces.namespace_of(workflow_id),
        "workflow_type": workflow_type,
        "task_queue": task_queue,
        **payload_columns("input", input_value),
        # The start's span: every later span of the run joins its trace.
        "trace_context": json_or_none(current_carrier() or None),
        "execution_timeout": execution_timeout,
        "deadline": deadline,
        "flow": flow,
        **(keys or StartKeys()).params(),
        **(parent.params() if parent is not None else NO_PARENT),
    }


def following(params: dict[str, Any], latest: Row) -> dict[str, Any]:
    """start_params made those of the run after `latest` (a LOCK_LATEST row): the next number,
    and a fence mark above the one its leases reached."""
    return params | {
        "run_number": latest["run_number"] + 1,
        "previous_run_id": latest["run_id"],
        "fence": latest["fence"] + 1,
    }


def carried(workflow_id: str, archived_run: str, cut: int | None = None) -> dict[str, Any]:
    """CARRY_SIGNALS' parameters: the signals of `archived_run` left unconsumed, or with a
    `cut` (an event id) every signal received from it on."""
    return {
        "workflow_id": workflow_id,
        "archived_run": archived_run,
        "carry_from": cut or 0,
        "consumed_before": cut,
    }


class Chains(JournalBase):
    """Making the next run of a workflow id."""

    async def _next_run(
        self, conn: AsyncConnection, latest: Row, params: dict[str, Any], carry_signals: bool
    ) -> None:
        """In the caller's transaction, with `latest` (a LOCK_LATEST row) locked and closed:
        archive it and start the run of `params` (start_params) in its
        place, with the signals it left unconsumed if `carry_signals`."""
        params = following(params, latest)
        workflow_id = latest["workflow_id"]
        await conn.execute(ARCHIVE, {"workflow_id": workflow_id, "next_run_id": params["run_id"]})
        created = await fetch_one(conn, store.START_WORKFLOW, params)
        if created is None:  # the key was just freed under the row lock: cannot be taken
            raise RuntimeError(f"workflow {workflow_id!r}: the next run could not be created")
        if carry_signals:
            await conn.execute(CARRY_SIGNALS, carried(workflow_id, latest["run_id"]))

    async def _continue_as_new(self, conn: AsyncConnection, params: dict[str, Any]) -> Row | None:
        """Close the run under its lease as continued as new (`params`: CLOSE_RUN's, the
        payload the next run's input) and start the next run, in one transaction: the closed
        run's row (None: the lease no longer holds it)."""
        workflow_id = params["workflow_id"]
        async with conn.transaction():
            # The row lock first: a signal waiting for it lands in the run it then finds.
            latest = await fetch_one(conn, LOCK_LATEST, [workflow_id])
            if latest is None:
                return None
            closed = await fetch_one(conn, store.CLOSE_RUN, params)
            if closed is None:
                return None
            next_run = start_params(
                workflow_id,
                latest["workflow_type"],
                latest["task_queue"],
                payload_in(params, "payload"),
                run_id=new_run_id(),
                deadline=latest["deadline"],
                flow=latest["flow"],
                # A singleton chain stays its key's one open run.
                keys=StartKeys(singleton_key=latest["singleton_key"]),
            )
            # A child's chain stays its parent's child.
            next_run |= {name: latest[name] for name in NO_PARENT}
            await self._next_run(conn, latest, next_run, carry_signals=True)
        return closed

    async def start_again(
        self,
        conn: AsyncConnection,
        params: dict[str, Any],
        policy: IdReusePolicy,
    ) -> tuple[bool, RunStatus, str] | Row | None:
        """A start whose workflow id is taken (`params`: start_params of a first run): the run
        its request id made, or a new run if the last one is closed and `policy` allows it
        (started, status, run id); otherwise the last run (a LOCK_LATEST row), for the caller
        to compare with the request. None: another start made a new run of the id meanwhile
        (the row it waited for was archived); ask again."""
        workflow_id = params["workflow_id"]
        async with conn.transaction():
            latest = await fetch_one(conn, LOCK_LATEST, [workflow_id])
            if latest is None:
                return None
            if params["request_id"] is not None:
                made = await fetch_one(conn, SELECT_REQUESTED, [workflow_id, params["request_id"]])
                if made is not None:
                    return False, RunStatus(made["status"]), made["run_id"]
            status = RunStatus(latest["status"])
            if status in OPEN_STATUSES or not policy.allows(status):
                return latest
            await self._next_run(conn, latest, params, carry_signals=False)
        self._on_scheduled()
        return True, RunStatus.RUNNING, params["run_id"]

    async def run_of(self, workflow_id: str, run_id: str) -> str:
        """The key of the run `run_id` of the workflow id's chain (the workflow id itself for
        the latest, when `run_id` is empty)."""
        if not run_id:
            return workflow_id
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, SELECT_RUN_KEY, [workflow_id, run_id])
        if row is None:
            raise errors.not_found(
                Reason.RUN_NOT_FOUND,
                f"workflow {workflow_id!r} has no run {run_id[:100]!r}: name a run id its "
                "describe or history showed (run_id, previous_run_id, next_run_id)",
            )
        return str(row["workflow_id"])
