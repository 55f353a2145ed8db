"""The journal's rules: fence-checked writes, idempotent starts, reads with paging."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc
from opentelemetry import trace
from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, limits, namespaces
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.common.text import printable
from perdure.history import convert, store
from perdure.history.group_commit import GroupCommit
from perdure.history.metrics import (
    FENCE_REJECTIONS,
    WORKFLOWS_CLOSED,
    WORKFLOWS_STARTED,
    timed_write,
)
from perdure.history.store import Row
from perdure.telemetry.propagation import current_carrier, links_to

log = logging.getLogger(__name__)
tracer = trace.get_tracer("perdure.history")

MAX_PAGE_SIZE = 1000
# A run whose holders record nothing (not even a step attempt's start) this many times in a
# row lost its worker in its own code each time: parked (PERDURE_CRASH_LOOP_LIMIT).
DEFAULT_CRASH_LOOP_LIMIT = 5
EXPIRE_BATCH = 200
MAX_ID_SHOWN = 200  # of an id a caller sent, in the message that answers it
DEFAULT_PAGE_SIZE = 100
CLOSED_STATUS = {
    "result": "COMPLETED",
    "failure": "FAILED",
    "park": "PARKED",
    "cancelled": "CANCELLED",
}


def page_size(requested: int) -> int:
    """The page size to use for a request (0 means the default)."""
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


@dataclass(frozen=True)
class Call:
    """Where a worker's record belongs: the lease and the call of the code."""

    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int


@dataclass(frozen=True)
class Appended:
    """What an append returns to the worker."""

    event_id: int
    due_at: datetime | None
    cancel_requested: bool


@dataclass(frozen=True)
class RemoteStep:
    """What a remote step's call asks for: where it runs and how its attempts go."""

    step_type: str
    task_queue: str
    input_value: Payload
    retry: dict[str, Any]  # the RetryPolicy message as JSON
    timeout_seconds: float | None
    heartbeat_timeout_seconds: float | None = None


@dataclass(frozen=True)
class StepAttempt:
    """A step task's record of one attempt of its remote step."""

    workflow_id: str
    step_id: str
    fence: int
    attempt: int
    event_type: str  # STEP_COMPLETED, STEP_FAILED or STEP_ATTEMPT_FAILED
    payload: Payload | None
    failure: dict[str, str] | None
    retry_in: float | None  # STEP_ATTEMPT_FAILED: seconds until the next attempt
    started_at: datetime | None


@dataclass(frozen=True)
class Described:
    """Everything DescribeWorkflow shows."""

    info: wf.WorkflowInfo
    steps: list[wf.StepInfo]
    current_step: str
    pending_signals: list[wf.PendingSignal]
    state: dict[str, Payload]


@dataclass(frozen=True)
class Loaded:
    """A run as a worker loads it."""

    info: wf.WorkflowInfo
    events: list[wf.HistoryEvent]
    now: datetime
    progress: list[Row]


class Journal:
    """Every read and write of the history schema goes through here."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        on_scheduled: Callable[[], None],
        crash_loop_limit: int = DEFAULT_CRASH_LOOP_LIMIT,
    ) -> None:
        self._pool = pool
        # Loads in a row that may find nothing recorded since the last before the run is parked.
        self._crash_loop_limit = crash_loop_limit
        self._on_scheduled = on_scheduled  # wakes the outbox relay after a commit
        self._records = GroupCommit(pool)  # the workers' records, many in one commit

    # -- the public API's calls ------------------------------------------------------------

    async def start(
        self,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        execution_timeout: float | None = None,
    ) -> tuple[bool, str]:
        """Create the run and schedule it; an identical earlier start returns it unchanged. A
        run with an `execution_timeout` (seconds) fails once it is open that long."""
        async with self._pool.connection() as conn:
            created = await self._create(
                conn, workflow_id, workflow_type, task_queue, input_value, execution_timeout
            )
            if created:
                _count_started(workflow_type)
                return True, "RUNNING"
            existing = await self._require(conn, workflow_id)
        mismatch = [
            name
            for name, asked, stored in (
                ("workflow_type", workflow_type, existing["workflow_type"]),
                ("task_queue", task_queue, existing["task_queue"]),
                ("input", input_value, store.payload_of(existing, "input")),
            )
            if asked != stored
        ]
        if mismatch:
            raise errors.already_exists(
                "WORKFLOW_ID_CONFLICT",
                f"workflow id {workflow_id!r} is already used by a run with a different "
                f"{', '.join(mismatch)}; choose another id or repeat the original request",
            )
        return False, str(existing["status"])

    async def signal(
        self, workflow_id: str, name: str, payload: Payload, signal_id: str | None
    ) -> bool:
        """Journal a signal and wake the run; False when its id was already received."""
        async with self._pool.connection() as conn:
            return await self._signal(conn, workflow_id, name, payload, signal_id)

    async def signal_with_start(
        self,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        name: str,
        payload: Payload,
        signal_id: str | None,
        execution_timeout: float | None = None,
    ) -> tuple[bool, bool]:
        """Start the run if the id is free, then signal it: (started, accepted), atomically."""
        async with self._pool.connection() as conn, conn.transaction():
            started = await self._create(
                conn, workflow_id, workflow_type, task_queue, input_value, execution_timeout
            )
            accepted = await self._signal(conn, workflow_id, name, payload, signal_id)
        self._on_scheduled()  # again, now that the transaction has committed
        if started:
            _count_started(workflow_type)  # counted once committed: started = closed + open
        return started, accepted

    async def cancel(self, workflow_id: str, reason: str, by: str) -> None:
        """Ask the run to cancel and wake it, audited as `by`'s (an API key id); asking again
        changes nothing."""
        params = store.event_params(
            workflow_id=workflow_id,
            event_type="CANCEL_REQUESTED",
            failure={"type": "CancelRequested", "message": reason, "stack_trace": ""},
            wake=True,
        ) | store.audit_params(workflow_id, by, reason)
        attributes = {"perdure.workflow.id": workflow_id}
        with tracer.start_as_current_span("perdure.cancel.request", attributes=attributes) as span:
            async with self._pool.connection() as conn:
                requested = await store.fetch_one(conn, store.REQUEST_CANCEL, params)
                if requested is not None:
                    _link_workflow(span, requested)
                    self._on_scheduled()
                    return
                row = await self._require(conn, workflow_id)
        if row["status"] not in store.OPEN_STATUSES:
            raise _closed(workflow_id, row["status"])

    async def terminate(self, workflow_id: str, reason: str, by: str) -> None:
        """Close the run at once as terminated, audited as `by`'s (an API key id)."""
        failure = {"type": "Terminated", "message": reason, "stack_trace": ""}
        params = store.event_params(
            workflow_id=workflow_id, event_type="WORKFLOW_TERMINATED", failure=failure
        ) | store.audit_params(workflow_id, by, reason)
        async with self._pool.connection() as conn:
            with timed_write("workflow_terminated"):
                closed = await store.fetch_one(conn, store.TERMINATE, params)
            if closed is None:
                row = await self._require(conn, workflow_id)
                raise _closed(workflow_id, row["status"])
        self._on_scheduled()  # its tasks are retired
        _count_closed(closed, "TERMINATED")

    async def query(self, workflow_id: str, key: str) -> Row:
        """The latest value published under `key` (columns payload and created_at)."""
        async with self._pool.connection() as conn:
            await self._require(conn, workflow_id)
            row = await store.fetch_one(
                conn, store.SELECT_STATE, {"workflow_id": workflow_id, "key": key}
            )
        if row is None:
            raise errors.not_found(
                "STATE_NOT_FOUND",
                f"workflow {workflow_id!r} has not published a value under {key!r} "
                "(the code publishes with ctx.set_state)",
            )
        return row

    async def describe(self, workflow_id: str) -> Described:
        """The run, its steps, what it does now, its pending signals and published state."""
        async with self._pool.connection() as conn:
            row = await self._require(conn, workflow_id, store.SELECT_WORKFLOW_WITH_PROGRESS)
            events = await store.fetch_all(conn, store.SELECT_DESCRIBED_EVENTS, [workflow_id])
        steps = convert.step_infos(events, convert.progress_rows(row["progress"]))
        _leave_out_outputs(steps, limits.DESCRIBED_OUTPUT_BYTES)
        return Described(
            info=convert.workflow_info(row),
            steps=steps,
            current_step=convert.current_step(row, steps),
            pending_signals=convert.pending_signals(events),
            state=convert.published_state(events),
        )

    async def history_page(
        self, workflow_id: str, requested_size: int, token: str, after_event_id: int = 0
    ) -> tuple[list[wf.HistoryEvent], str]:
        """One page of events (after `after_event_id` when there is no token) and the token of
        the next (empty at the end)."""
        after = decode_page_token(token) if token else after_event_id
        size = page_size(requested_size)
        async with self._pool.connection() as conn:
            await self._require(conn, workflow_id)
            rows = await store.fetch_all(
                conn,
                store.SELECT_EVENTS,
                {"workflow_id": workflow_id, "after": after, "limit": size + 1},
            )
        events = [convert.history_event(row) for row in rows[:size]]
        kept = _within(events, limits.HISTORY_PAGE_BYTES)
        more = len(rows) > kept
        next_token = encode_page_token(rows[kept - 1]["event_id"]) if more else ""
        return events[:kept], next_token

    async def list_page(
        self,
        namespace: str,
        status: str | None,
        workflow_type: str | None,
        requested_size: int,
        token: str,
        id_prefix: str | None = None,
        stuck: bool = False,
    ) -> tuple[list[wf.WorkflowInfo], str]:
        """One page of runs (whose qualified id starts with `id_prefix`, if given; only stuck
        ones if `stuck`), newest first, and the token of the next."""
        before = decode_page_token(token)
        size = page_size(requested_size)
        async with self._pool.connection() as conn:
            rows = await store.fetch_all(
                conn,
                store.LIST_WORKFLOWS,
                {
                    "namespace": namespace,
                    "status": status,
                    "workflow_type": workflow_type,
                    "id_prefix": id_prefix,
                    "stuck": stuck,
                    "before": before,
                    "limit": size + 1,
                },
            )
        more = len(rows) > size
        rows = rows[:size]
        next_token = encode_page_token(rows[-1]["run_seq"]) if more else ""
        return [convert.workflow_info(row) for row in rows], next_token

    # -- the worker protocol's calls, each under the lease's fence -------------------------

    async def load(self, workflow_id: str, fence: int) -> Loaded:
        """Raise the fence mark to `fence` and return the run with its whole journal.

        The mark is committed before the read: from then on every earlier holder is fenced out.
        """
        async with self._pool.connection() as conn:
            row = await store.fetch_one(
                conn,
                store.ADVANCE_FENCE,
                {"workflow_id": workflow_id, "fence": fence, "lease_key": store.lease_key()},
            )
            if row is None:
                raise await self._rejection(conn, workflow_id, fence)
            if row["status"] in store.OPEN_STATUSES and row["idle_loads"] > self._crash_loop_limit:
                await self._park_crash_loop(conn, workflow_id, fence, row["idle_loads"] - 1)
            events = await store.fetch_all(
                conn, store.SELECT_EVENTS, {"workflow_id": workflow_id, "after": 0, "limit": None}
            )
        return Loaded(
            info=convert.workflow_info(row),
            events=[convert.history_event(event) for event in events],
            now=row["db_now"],
            progress=convert.progress_rows(row["progress"]),
        )

    async def _park_crash_loop(
        self, conn: AsyncConnection, workflow_id: str, fence: int, losses: int
    ) -> None:
        """Park a run whose last `losses` holders each recorded nothing before their lease
        ended: its own code (outside steps) kills or hangs the worker."""
        failure = {
            "type": "WorkerCrashLoop",
            "message": (
                f"the workflow's code lost its worker {losses} times in a row without recording "
                "anything (a crash or hang outside its steps, e.g. os._exit, a segfault or OOM); "
                f"parked after {self._crash_loop_limit} (PERDURE_CRASH_LOOP_LIMIT)"
            ),
            "stack_trace": "",
        }
        params = store.event_params(
            workflow_id=workflow_id, event_type="WORKFLOW_PARKED", fence=fence, failure=failure
        )
        params.update(status="PARKED")
        log.warning("parked workflow %s: %s", printable(workflow_id), failure["message"])
        closed = await store.fetch_one(conn, store.CLOSE_RUN, params)
        if closed is not None:
            _count_closed(closed, "PARKED")
        raise _closed(workflow_id, "PARKED")

    async def expire_runs(self) -> int:
        """Fail the open runs past their execution deadline (a batch); how many were failed."""
        async with self._pool.connection() as conn:
            with timed_write("workflow_failed"):
                rows = await store.fetch_all(conn, store.EXPIRE_RUNS, {"limit": EXPIRE_BATCH})
        for row in rows:
            log.info("workflow %s failed: execution timeout", printable(row["workflow_id"]))
            _count_closed(row, "FAILED")
        return len(rows)

    async def park_too_large(
        self, workflow_id: str, fence: int, size: int, limit: int
    ) -> errors.ApiError:
        """Park a run (under the fence that just loaded it) whose journal is too large to load;
        return the error that answers the load."""
        message = (
            f"the journal of workflow {workflow_id!r} is {size} bytes, more than the "
            f"{limit} bytes a worker can load; it is parked"
        )
        log.error("%s", printable(message))
        await self.finish(
            workflow_id, fence, "park", wf.Failure(type="JournalTooLarge", message=message)
        )
        return errors.failed_precondition("JOURNAL_TOO_LARGE", message)

    async def record(
        self, call: Call, event_type: str, *, positioned: bool = True, **fields: Any
    ) -> Appended:
        """Append the event of one call of the code. Recording the same event at the same call
        again (a retried request) is a no-op; a different one there is STEP_CONFLICT. A failed
        attempt is not `positioned`: the call's position belongs to its final outcome."""
        params = store.event_params(
            workflow_id=call.workflow_id,
            fence=call.fence,
            event_type=event_type,
            step_id=call.step_id,
            step_name=call.step_name,
            position=call.position if positioned else None,
            **fields,
        )
        return await self._append(call, params)

    async def heartbeat(
        self,
        workflow_id: str,
        fence: int,
        step_id: str,
        attempt: int,
        details: Payload | None,
        step_task: bool = False,
    ) -> bool:
        """Keep a step attempt's latest progress; returns whether a cancel was requested. With
        `step_task`, `fence` is the remote step's own lease."""
        params = {
            "workflow_id": workflow_id,
            "fence": fence,
            "step_id": step_id,
            "attempt": attempt,
            **store.payload_columns("details", details),
            "lease_key": store.lease_key(),
        }
        query = store.RECORD_STEP_HEARTBEAT if step_task else store.RECORD_HEARTBEAT
        async with self._pool.connection() as conn:
            with timed_write("heartbeat"):
                row = await store.fetch_one(conn, query, params)
            if row is None:
                if step_task:
                    raise await self._step_rejection(conn, workflow_id, step_id, fence)
                raise await self._rejection(conn, workflow_id, fence)
        return bool(row["cancel_requested"])

    async def schedule_step(self, call: Call, step: RemoteStep) -> Appended:
        """Journal a remote step's call and make its step task due, in one transaction; the
        same call sent again is a no-op."""
        params = store.event_params(
            workflow_id=call.workflow_id,
            fence=call.fence,
            event_type="STEP_SCHEDULED",
            step_id=call.step_id,
            step_name=call.step_name,
            position=call.position,
            payload=step.input_value,
            name=step.step_type,
            task_queue=step.task_queue,
        )
        params.update(
            retry=Jsonb(step.retry),
            timeout_seconds=step.timeout_seconds,
            heartbeat_timeout_seconds=step.heartbeat_timeout_seconds,
        )
        async with self._pool.connection() as conn:
            try:
                with timed_write("step_scheduled"):
                    row = await store.fetch_one(conn, store.SCHEDULE_STEP, params)
            except UniqueViolation:
                return await self._existing_call(conn, call, params)
            if row is None:
                raise await self._rejection(conn, call.workflow_id, call.fence)
        self._on_scheduled()
        return Appended(row["event_id"], None, row["cancel_requested"])

    async def load_step(self, workflow_id: str, step_id: str, fence: int) -> Row:
        """Raise a remote step's fence mark to `fence` and return what to execute (columns of
        store.LOAD_STEP). A closed step or run is FAILED_PRECONDITION: nothing to do."""
        params = {
            "workflow_id": workflow_id,
            "step_id": step_id,
            "fence": fence,
            "lease_key": store.lease_key(),
        }
        async with self._pool.connection() as conn:
            row = await store.fetch_one(conn, store.LOAD_STEP, params)
            if row is None:
                raise await self._step_rejection(conn, workflow_id, step_id, fence)
        if row["status"] not in store.OPEN_STATUSES:
            raise _closed(workflow_id, row["status"])
        if row["closed"]:
            raise _step_closed(workflow_id, step_id)
        return row

    async def record_step_attempt(self, attempt: StepAttempt) -> Appended:
        """Record an attempt of a remote step under its step task's fence: a failed attempt
        makes the step task due at the retry; a final outcome closes the step and wakes the
        run. The same record sent again (its answer was lost) is a no-op."""
        final = attempt.event_type != "STEP_ATTEMPT_FAILED"
        params = store.event_params(
            workflow_id=attempt.workflow_id,
            fence=attempt.fence,
            event_type=attempt.event_type,
            step_id=attempt.step_id,
            attempt=attempt.attempt,
            payload=attempt.payload,
            failure=attempt.failure,
            due_in=attempt.retry_in,
            started_at=attempt.started_at,
        )
        params["final"] = final
        call = Call(attempt.workflow_id, attempt.fence, attempt.step_id, "", 0)
        async with self._pool.connection() as conn:
            try:
                with timed_write(attempt.event_type.lower()):
                    row = await store.fetch_one(conn, store.RECORD_STEP_TASK, params)
            except UniqueViolation:  # this failed attempt is recorded already
                return await self._existing_call(conn, call, params)
            if row is None:
                rejection = await self._step_rejection(
                    conn, attempt.workflow_id, attempt.step_id, attempt.fence
                )
                if final and rejection.reason == "STEP_CLOSED":
                    # Recorded already, if it is this very outcome (a retried request).
                    return await self._existing_call(conn, call, params, remote_outcome=True)
                raise rejection
        if final:
            self._on_scheduled()
        return Appended(row["event_id"], row["due_at"], row["cancel_requested"])

    async def suspend(
        self, workflow_id: str, fence: int, kind: str, name: str, until: datetime | None
    ) -> None:
        """Mark the run waiting and schedule its wake-up at `until` (if any)."""
        params = store.event_params(
            workflow_id=workflow_id,
            fence=fence,
            event_type="WORKFLOW_SUSPENDED",
            wait={"kind": kind, "name": name, "until": until.isoformat() if until else None},
            run_at=until,
            wake=until is not None,
            wake_reason=kind.lower() if until is not None else None,
        )
        params.update(wait_kind=kind, wait_name=name)
        async with self._pool.connection() as conn:
            with timed_write("workflow_suspended"):
                suspended = await store.fetch_one(conn, store.SUSPEND, params)
            if suspended is None:
                raise await self._rejection(conn, workflow_id, fence)
        if until is not None:
            self._on_scheduled()

    async def finish(
        self, workflow_id: str, fence: int, outcome: str, value: Payload | wf.Failure
    ) -> str:
        """Close the run as completed ("result"), failed ("failure"), parked ("park") or
        cancelled ("cancelled")."""
        status = CLOSED_STATUS[outcome]
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=f"WORKFLOW_{status}",  # only WORKFLOW_COMPLETED keeps the payload
            fence=fence,
            payload=value if isinstance(value, Payload) else None,
            failure=convert.failure_to_dict(value) if isinstance(value, wf.Failure) else None,
        )
        params["status"] = status
        async with self._pool.connection() as conn:
            with timed_write(f"workflow_{status.lower()}"):
                closed = await store.fetch_one(conn, store.CLOSE_RUN, params)
            if closed is not None:
                self._on_scheduled()  # its tasks are retired
                _count_closed(closed, status)
                return status
            lease = await store.fetch_one(conn, store.SELECT_CLOSE, [workflow_id])
        if lease is not None and _may_see(lease) and lease["fence"] == fence:
            if _closed_by(lease, fence, params):
                return status  # a retried call whose first attempt committed
            if lease["status"] not in store.OPEN_STATUSES:
                raise errors.failed_precondition(
                    "WORKFLOW_CLOSED",
                    f"workflow {workflow_id!r} is already {lease['status'].lower()}, closed by "
                    "this lease with another outcome: a FinishWorkflow sent again must be "
                    "identical to the first (its result or failure is not changed)",
                )
        raise _lease_refusal(lease, workflow_id, "", fence) or _changed(workflow_id)

    async def consume_signals(
        self, call: Call, name: str, event_ids: list[int], payload: Payload
    ) -> Appended:
        """Journal the consumption of the run's signals `event_ids` (SIGNAL_RECEIVED events,
        each named once and not consumed yet), marking them consumed in the same statement.
        The same call sent again (its answer was lost) gets the first answer; any other
        consumption breaking the rule is refused and marks nothing."""
        params = store.event_params(
            workflow_id=call.workflow_id,
            fence=call.fence,
            event_type="SIGNAL_CONSUMED",
            step_id=call.step_id,
            step_name=call.step_name,
            position=call.position,
            name=name,
            consumed=event_ids,
            payload=payload,
        )
        async with self._pool.connection() as conn:
            try:
                with timed_write("signal_consumed"):
                    row = await store.fetch_one(conn, store.CONSUME_SIGNALS, params)
            except UniqueViolation:  # this call is recorded, or a signal was consumed meanwhile
                row = None
            if row is not None:
                return Appended(row["event_id"], row["due_at"], row["cancel_requested"])
            lease = await store.fetch_one(conn, store.SELECT_LEASE, [call.workflow_id])
            if (refusal := _lease_refusal(lease, call.workflow_id, "", call.fence)) is not None:
                raise refusal
            keys = {"workflow_id": call.workflow_id, "step_id": call.step_id}
            recorded = await store.fetch_one(
                conn, store.SELECT_STEP_EVENT, keys | {"position": call.position}
            )
            if recorded is not None:  # the same call again, or a conflict at this call
                return await self._existing_call(conn, call, params)
            raise await self._unconsumable(conn, call.workflow_id, event_ids)

    # -- helpers ----------------------------------------------------------------------------

    async def _create(
        self,
        conn: AsyncConnection,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        execution_timeout: float | None = None,
    ) -> bool:
        params = {
            "workflow_id": workflow_id,
            "namespace": namespaces.namespace_of(workflow_id),
            "workflow_type": workflow_type,
            "task_queue": task_queue,
            **store.payload_columns("input", input_value),
            # The start's span: every later span of the run joins its trace.
            "trace_context": store.json_or_none(current_carrier() or None),
            "execution_timeout": execution_timeout,
        }
        with timed_write("workflow_started"):
            created = await store.fetch_one(conn, store.START_WORKFLOW, params)
        if created is None:
            return False
        self._on_scheduled()
        return True

    async def _signal(
        self,
        conn: AsyncConnection,
        workflow_id: str,
        name: str,
        payload: Payload,
        signal_id: str | None,
    ) -> bool:
        attributes = {"perdure.workflow.id": workflow_id, "perdure.signal.name": name}
        if signal_id:
            attributes["perdure.signal.id"] = signal_id
        with tracer.start_as_current_span("perdure.signal.receive", attributes=attributes) as span:
            params = store.event_params(
                workflow_id=workflow_id,
                event_type="SIGNAL_RECEIVED",
                name=name,
                payload=payload,
                signal_id=signal_id,
                wake=True,
                trace_context=current_carrier(),  # the consuming span links back to this one
            )
            try:
                # A savepoint, so that a duplicate id does not abort a SignalWithStart's start.
                async with conn.transaction():
                    with timed_write("signal_received"):
                        row = await store.fetch_one(conn, store.SIGNAL, params)
            except UniqueViolation:
                return False  # the same id, sent concurrently
            if row is not None:
                _link_workflow(span, row)
                self._on_scheduled()
                return True
            span.set_attribute("perdure.signal.accepted", False)
        if signal_id and await store.fetch_one(conn, store.SELECT_SIGNAL, [workflow_id, signal_id]):
            return False
        current = await self._require(conn, workflow_id)
        raise _closed(workflow_id, current["status"])

    async def _append(self, call: Call, params: dict[str, Any]) -> Appended:
        try:
            with timed_write(params["event_type"].lower()):
                row = await self._records.append(params)
        except UniqueViolation:
            async with self._pool.connection() as conn:
                return await self._existing_call(conn, call, params)
        if row is None:
            async with self._pool.connection() as conn:
                raise await self._rejection(conn, call.workflow_id, call.fence)
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
        row = await store.fetch_one(conn, query, keys)
        same = row is not None and all(
            row[column] == _plain(params[column]) for column in _RECORDED_COLUMNS
        )
        if row is not None and same:
            return Appended(row["event_id"], row["due_at"], False)
        raise errors.failed_precondition(
            "STEP_CONFLICT",
            f"workflow {call.workflow_id!r} already recorded something different for step "
            f"{call.step_id!r} or position {call.position}; replay the journal instead of "
            "re-running the call",
        )

    async def _require(
        self, conn: AsyncConnection, workflow_id: str, query: str = store.SELECT_WORKFLOW
    ) -> Row:
        row = await store.fetch_one(conn, query, [workflow_id])
        if row is None:
            raise errors.not_found("WORKFLOW_NOT_FOUND", f"no workflow with id {workflow_id!r}")
        return row

    async def _rejection(
        self, conn: AsyncConnection, workflow_id: str, fence: int
    ) -> errors.ApiError:
        """Why a fenced write matched no row (see _lease_refusal)."""
        lease = await store.fetch_one(conn, store.SELECT_LEASE, [workflow_id])
        return _lease_refusal(lease, workflow_id, "", fence) or _changed(workflow_id)

    async def _step_rejection(
        self, conn: AsyncConnection, workflow_id: str, step_id: str, fence: int
    ) -> errors.ApiError:
        """Why a step task's write matched no row (see _lease_refusal)."""
        lease = await store.fetch_one(conn, store.SELECT_STEP_TASK, [workflow_id, step_id])
        if lease is None and _may_see(lease):
            await self._require(conn, workflow_id)  # an unknown run, rather than step
        return _lease_refusal(lease, workflow_id, step_id, fence) or _changed(workflow_id)

    async def _unconsumable(
        self, conn: AsyncConnection, workflow_id: str, event_ids: list[int]
    ) -> errors.ApiError:
        """Why a consumption under a good lease was refused: which of the ids it names are
        named twice, are not signals of the run, or are consumed already."""
        twice = sorted(i for i, times in Counter(event_ids).items() if times > 1)
        if twice:
            return errors.invalid_argument(
                f"event_ids names {_ids(twice)} more than once: each signal is consumed once"
            )
        rows = await store.fetch_all(
            conn,
            store.SELECT_SIGNALS_NAMED,
            {"workflow_id": workflow_id, "event_ids": event_ids},
        )
        signals = {row["event_id"]: row["consumed"] for row in rows}
        strangers = [i for i in event_ids if i not in signals]
        if strangers:
            return errors.invalid_argument(
                f"event_ids {_ids(strangers)} are not signals received by workflow "
                f"{workflow_id!r}: name SIGNAL_RECEIVED events of its journal"
            )
        taken = [i for i in event_ids if signals[i]]
        if taken:
            return errors.failed_precondition(
                "SIGNAL_ALREADY_CONSUMED",
                f"signal events {_ids(taken)} of workflow {workflow_id!r} are consumed already; "
                "replay the journal instead of re-running the call",
            )
        return _changed(workflow_id)


def lease_not_held(workflow_id: str, step_id: str, fence: int) -> errors.ApiError:
    """The one answer to a worker key naming a lease it does not hold: it names only what the
    caller sent, never what became of the run, its status or its fence mark."""
    return errors.ApiError(
        grpc.StatusCode.PERMISSION_DENIED,
        "LEASE_NOT_HELD",
        f"API key {store.lease_key()} holds no lease of {_lease_name(workflow_id, step_id)} "
        f"with fence {fence}: only the worker the task was granted to may use it",
    )


def _lease_refusal(
    lease: Row | None, workflow_id: str, step_id: str, fence: int
) -> errors.ApiError | None:
    """Why a fenced call under `lease` (a SELECT_LEASE or SELECT_STEP_TASK row; None: no such
    run or step) matched no row: unknown run or step, stale fence, closed run or step, a fence
    never loaded. With worker keys, only the key whose load set the fence mark learns any of
    that: to every other key it is LEASE_NOT_HELD. None: the lease is in order (something else
    refused the call)."""
    if not _may_see(lease):
        return lease_not_held(workflow_id, step_id, fence)
    if lease is None:
        if step_id:
            return errors.not_found(
                "STEP_NOT_FOUND", f"workflow {workflow_id!r} has no remote step {step_id!r}"
            )
        return errors.not_found("WORKFLOW_NOT_FOUND", f"no workflow with id {workflow_id!r}")
    what = _lease_name(workflow_id, step_id)
    if lease["fence"] > fence:
        return _stale(what, fence, lease["fence"])
    if lease["status"] not in store.OPEN_STATUSES:
        return _closed(workflow_id, lease["status"])
    if step_id and lease["closed"]:
        return _step_closed(workflow_id, step_id)
    if lease["fence"] < fence:
        return _not_loaded(what, fence, "LoadStep" if step_id else "LoadJournal")
    return None


def _closed_by(run: Row, fence: int, params: dict[str, Any]) -> bool:
    """Whether `run` (a SELECT_CLOSE row) was closed by this very close: the same lease, status,
    result and failure. Any other close of a closed run is refused, never acknowledged unstored."""
    asked = (
        fence,
        params["status"],
        params["payload"],
        params["payload_encoding"],
        _plain(params["failure"]),
    )
    stored = (run["fence"], run["status"], run["result"], run["result_encoding"], run["failure"])
    return stored == asked


def _may_see(lease: Row | None) -> bool:
    """Whether the caller may learn what became of a lease: anyone without keys; with keys, the
    key whose load set the fence mark (the key the scheduler granted the lease to) alone."""
    key = store.lease_key()
    return not key or (lease is not None and lease["fence_key"] == key)


def _lease_name(workflow_id: str, step_id: str) -> str:
    """A lease as messages and logs name it (the ids as the caller sent them, cut short)."""
    workflow = f"workflow {workflow_id[:MAX_ID_SHOWN]}"
    return f"step {step_id[:MAX_ID_SHOWN]} of {workflow}" if step_id else workflow


def _ids(event_ids: list[int]) -> str:
    return ", ".join(str(i) for i in event_ids[:20]) + (", ..." if len(event_ids) > 20 else "")


def _changed(workflow_id: str) -> errors.ApiError:
    """A call refused although its lease was in order when looked at: the run changed
    in between."""
    return errors.failed_precondition(
        "STEP_CONFLICT",
        f"workflow {workflow_id!r} changed while this call was written; replay the journal "
        "instead of re-running the call",
    )


def _link_workflow(span: trace.Span, appended: Row) -> None:
    """Link a request's span (in its caller's trace) to the trace of the workflow it reached."""
    for link in links_to(appended["workflow_trace_context"] or {}):
        span.add_link(link.context, {"perdure.link": "workflow"})


def _count_started(workflow_type: str) -> None:
    WORKFLOWS_STARTED.add(1, {"perdure.workflow.type": workflow_type})


def _count_closed(row: Row, status: str) -> None:
    attributes = {
        "perdure.workflow.type": row["workflow_type"],
        "perdure.workflow.outcome": status.lower(),
    }
    WORKFLOWS_CLOSED.add(1, attributes)


def _leave_out_outputs(steps: list[wf.StepInfo], budget: int) -> None:
    """Show the steps' outputs up to `budget` bytes in all; mark those left out."""
    for step in steps:
        size = step.output.ByteSize()
        if size > budget:
            step.ClearField("output")
            step.output_omitted = True
        else:
            budget -= size


def _within(events: list[wf.HistoryEvent], budget: int) -> int:
    """How many of `events`, from the first, fit in `budget` bytes (the first always does: an
    event alone fits in a message)."""
    for count, event in enumerate(events):
        budget -= event.ByteSize()
        if count and budget < 0:
            return count
    return len(events)


def _stale(what: str, fence: int, mark: int) -> errors.ApiError:
    FENCE_REJECTIONS.add(1)
    log.warning(
        "refused a write with stale fence %d to %s (fence mark %d)", fence, printable(what), mark
    )
    return errors.failed_precondition(
        "STALE_FENCE",
        f"stale fence {fence} for {what}: a newer lease (fence {mark}) owns it; stop working on it",
    )


def _not_loaded(what: str, fence: int, load: str) -> errors.ApiError:
    return errors.failed_precondition(
        "FENCE_NOT_LOADED",
        f"fence {fence} for {what} was never loaded: call {load} with it first (only a load "
        "takes up a lease)",
    )


def _step_closed(workflow_id: str, step_id: str) -> errors.ApiError:
    return errors.failed_precondition(
        "STEP_CLOSED",
        f"step {step_id!r} of workflow {workflow_id!r} has its outcome already; report the task "
        "done",
    )


def _closed(workflow_id: str, status: str) -> errors.ApiError:
    return errors.failed_precondition(
        "WORKFLOW_CLOSED", f"workflow {workflow_id!r} is already {status.lower()}"
    )


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


def _plain(value: Any) -> Any:
    """A parameter as the database gives it back (Jsonb unwrapped)."""
    return value.obj if isinstance(value, Jsonb) else value
