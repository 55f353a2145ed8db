"""A worker's record of one call of its code: appended under the run's lease (many records in
one commit, see group_commit.py), answered the same when sent again, refused as STEP_CONFLICT
when something different is recorded at that call. The base of the Journal's parts."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.common import errors, limits
from perdure.common.reasons import Reason
from perdure.history import fencing, store
from perdure.history.commit_feed import OnCommitted, no_watchers, nobody_waits
from perdure.history.group_commit import GroupCommit
from perdure.history.metrics import count_journaled, timed_write
from perdure.history.model import Appended, Call, StepRecord
from perdure.history.rows import Row, fetch_one
from perdure.telemetry.propagation import links_to

# A run whose holders record nothing (not even a step attempt's start) this many times in a
# row lost its worker in its own code each time: parked (PERDURE_CRASH_LOOP_LIMIT).
DEFAULT_CRASH_LOOP_LIMIT = 5

# What answers an append whose step id or position is taken already (a retried request).
Existing = Callable[[AsyncConnection, Call, dict[str, Any]], Awaitable[Appended]]


class JournalBase:
    """What every part of the Journal shares: the pool, the wake-up of the outbox relay, the
    group commit of the workers' records, and recording a call of the code."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        on_scheduled: Callable[[], None],
        crash_loop_limit: int = DEFAULT_CRASH_LOOP_LIMIT,
        page_bytes: int = limits.DEFAULT_JOURNAL_PAGE_BYTES,
        on_committed: OnCommitted = no_watchers,
        awaited: Callable[[str], bool] = nobody_waits,
        records_pool: AsyncConnectionPool | None = None,
    ) -> None:
        self._pool = pool
        self._page_bytes = page_bytes  # of events in a page of a worker's load
        # Loads in a row that may find nothing recorded since the last before the run is parked.
        self._crash_loop_limit = crash_loop_limit
        self._on_scheduled = on_scheduled  # wakes the outbox relay after a commit
        # Wakes this process's watchers of a run (its key; True: its status changed) after a
        # commit to it, before PostgreSQL's notification arrives (commit_feed.py).
        self._on_committed = on_committed
        self._awaited = awaited  # whether a caller here waits for a run's result
        # The workers' records, many in one commit; on a pool of their own when given, whose
        # connections plan the record statement once (db.open_pool's generic_plans).
        self._records = GroupCommit(records_pool or pool)

    async def record(self, call: Call, record: StepRecord) -> Appended:
        """Append the event of one call of the code. Recording the same event at the same call
        again (a retried request) is a no-op; a different one there is STEP_CONFLICT."""
        return await self.append_call(call, call_params(call, record), self._existing_call)

    async def append_call(self, call: Call, params: dict[str, Any], existing: Existing) -> Appended:
        """Append an event of the code's lease (store.event_params); when its step id or
        position is taken, answer what `existing` finds there instead."""
        try:
            with timed_write(params["event_type"].lower()):
                row = await self._records.append(params)
        except UniqueViolation:
            async with self._pool.connection() as conn:
                return await existing(conn, call, params)
        if row is None:
            async with self._pool.connection() as conn:
                if params["unless_cancel"] and await fencing.cancel_requested(conn, call.lease):
                    return Appended(0, None, True)  # not journaled: the code learns of it now
                raise await fencing.rejection(conn, call.lease)
        self._on_committed(call.workflow_id, False)
        count_journaled(journaled_size(params))
        return Appended(row["event_id"], row["due_at"], row["cancel_requested"])

    async def _existing_call(
        self,
        conn: AsyncConnection,
        call: Call,
        params: dict[str, Any],
        *,
        remote_outcome: bool = False,
    ) -> Appended:
        """The identical event already recorded at this call, or this failed attempt, or this
        remote step's outcome (a retried request), else STEP_CONFLICT."""
        keys: dict[str, Any] = {"workflow_id": call.workflow_id, "step_id": call.step_id}
        if remote_outcome:
            query = store.SELECT_REMOTE_OUTCOME
        elif params["position"] is None:  # a failed attempt, found by its number
            query, keys["attempt"] = store.SELECT_ATTEMPT_EVENT, params["attempt"]
        else:
            query, keys["position"] = store.SELECT_STEP_EVENT, call.position
        row = await fetch_one(conn, query, keys)
        same = row is not None and all(
            row[column] == plain(params[column]) for column in _RECORDED_COLUMNS
        )
        if row is not None and same:
            return Appended(row["event_id"], row["due_at"], False)
        raise errors.failed_precondition(
            Reason.STEP_CONFLICT,
            f"workflow {call.workflow_id!r} already recorded something different for step "
            f"{call.step_id!r} or position {call.position}; replay the journal instead of "
            "re-running the call",
        )

    async def _require(
        self, conn: AsyncConnection, workflow_id: str, query: str = store.SELECT_WORKFLOW
    ) -> Row:
        row = await fetch_one(conn, query, [workflow_id])
        if row is None:
            raise fencing.run_not_found(workflow_id)
        return row


def call_params(call: Call, record: StepRecord) -> dict[str, Any]:
    """The append parameters of the event of one call of the code, under its lease."""
    return store.event_params(
        workflow_id=call.workflow_id,
        fence=call.fence,
        lease_key=call.lease.key,
        event_type=record.event_type,
        step_id=call.step_id,
        step_name=call.step_name,
        position=call.position if record.positioned else None,
        attempt=record.attempt,
        payload=record.payload,
        failure=record.failure,
        due_at=record.due_at,
        due_in=record.due_in,
        name=record.name,
        started_at=record.started_at,
        unless_cancel=record.unless_cancel,
    )


def journaled_size(params: dict[str, Any]) -> int:
    """An appended event's bytes as its run's history_bytes counts them (store.event_size),
    its failure measured as JSON text."""
    failure = plain(params.get("failure"))
    return (
        store.EVENT_BYTES
        + len(params.get("payload") or b"")
        + (0 if failure is None else len(json.dumps(failure)))
    )


def link_workflow(span: trace.Span, appended: Row) -> None:
    """Link a request's span (in its caller's trace) to the trace of the workflow it reached."""
    for link in links_to(appended["workflow_trace_context"] or {}):
        span.add_link(link.context, {"perdure.link": "workflow"})


# What makes a record the same as one recorded: the payload's bytes and encoding included.
_RECORDED_COLUMNS = (
    "step_id",
    "position",
    "event_type",
    "payload",
    "payload_encoding",
    "failure",
    "consumed",
)


def plain(value: Any) -> Any:
    """A parameter as the database gives it back (Jsonb unwrapped)."""
    return value.obj if isinstance(value, Jsonb) else value
