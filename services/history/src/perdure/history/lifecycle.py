"""A run's life: its start (idempotent), a worker's load of it (which takes up its lease), its
close by its code, and a cancel or terminate from outside."""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.common.text import printable
from perdure.history import chains, convert, fencing, store
from perdure.history.appends import link_workflow, plain
from perdure.history.chains import Chains, IdReusePolicy
from perdure.history.metrics import count_closed, count_started, timed_write
from perdure.history.model import (
    OPEN_STATUSES,
    EventType,
    Lease,
    Loaded,
    Outcome,
    RunStatus,
)
from perdure.history.rows import (
    Row,
    fetch_all,
    fetch_one,
    payload_of,
)
from perdure.telemetry.spans import Tracer

log = logging.getLogger(__name__)
tracer = Tracer("perdure.history")

# A page of a worker's load holds at most this many events (and the journal's page bytes).
PAGE_EVENTS = 5000


class Lifecycle(Chains):
    """Starting, loading, closing, cancelling and terminating runs."""

    async def start(
        self,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        execution_timeout: float | None = None,
        policy: IdReusePolicy = IdReusePolicy.REFUSE,
        request_id: str | None = None,
        flow: bytes | None = None,
    ) -> tuple[bool, RunStatus, str]:
        """Create the run and schedule it: (started, status, run id). A start whose id is
        taken returns the run its `request_id` made, if any; makes a new run of the id if its
        last run is closed and `policy` allows; otherwise an identical start (type, queue,
        input) returns the last run unchanged, and a different one is ALREADY_EXISTS. A run
        with an `execution_timeout` (seconds) fails once it is open that long."""
        params = chains.start_params(
            workflow_id,
            workflow_type,
            task_queue,
            input_value,
            run_id=chains.new_run_id(),
            execution_timeout=execution_timeout,
            request_id=request_id,
            flow=flow,
        )
        async with self._pool.connection() as conn:
            if await self._create(conn, params):
                count_started(workflow_type)
                return True, RunStatus.RUNNING, params["run_id"]
            again = None
            while again is None:  # another start made the id's next run meanwhile: see it
                again = await self.start_again(conn, params, policy)
        if isinstance(again, tuple):
            if again[0]:
                count_started(workflow_type)
            return again
        existing = again
        mismatch = [
            name
            for name, asked, stored in (
                ("workflow_type", workflow_type, existing["workflow_type"]),
                ("task_queue", task_queue, existing["task_queue"]),
                ("input", input_value, payload_of(existing, "input")),
            )
            if asked != stored
        ]
        if mismatch:
            raise errors.already_exists(
                Reason.WORKFLOW_ID_CONFLICT,
                f"workflow id {workflow_id!r} is already used by a run with a different "
                f"{', '.join(mismatch)}{_reuse_hint(existing['status'], policy)}; choose "
                "another id or repeat the original request",
            )
        return False, RunStatus(existing["status"]), existing["run_id"]

    async def _create(self, conn: AsyncConnection, params: dict[str, Any]) -> bool:
        """Start the first run of a workflow id (chains.start_params); False if it is taken."""
        with timed_write("workflow_started"):
            created = await fetch_one(conn, store.START_WORKFLOW, params)
        if created is None:
            return False
        self._on_scheduled()
        return True

    async def cancel(self, workflow_id: str, reason: str, by: str) -> None:
        """Ask the run to cancel and wake it, audited as `by`'s (an API key id); asking again
        changes nothing."""
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=EventType.CANCEL_REQUESTED,
            failure={"type": "CancelRequested", "message": reason, "stack_trace": ""},
            wake=True,
        ) | store.audit_params(workflow_id, by, reason)
        attributes = {"perdure.workflow.id": workflow_id}
        with tracer.start_as_current_span("perdure.cancel.request", attributes=attributes) as span:
            async with self._pool.connection() as conn:
                requested = await fetch_one(conn, store.REQUEST_CANCEL, params)
                if requested is not None:
                    link_workflow(span, requested)
                    self._on_scheduled()
                    return
                row = await self._require(conn, workflow_id)
        if row["status"] not in OPEN_STATUSES:
            raise fencing.closed(workflow_id, row["status"])

    async def terminate(self, workflow_id: str, reason: str, by: str) -> None:
        """Close the run at once as terminated, audited as `by`'s (an API key id)."""
        failure = {"type": "Terminated", "message": reason, "stack_trace": ""}
        params = store.event_params(
            workflow_id=workflow_id, event_type=EventType.WORKFLOW_TERMINATED, failure=failure
        ) | store.audit_params(workflow_id, by, reason)
        async with self._pool.connection() as conn:
            with timed_write("workflow_terminated"):
                closed = await fetch_one(conn, store.TERMINATE, params)
            if closed is None:
                row = await self._require(conn, workflow_id)
                raise fencing.closed(workflow_id, row["status"])
        self._on_scheduled()  # its tasks are retired
        count_closed(closed["workflow_type"], RunStatus.TERMINATED)

    async def load(self, lease: Lease, after_event_id: int = 0, build_id: str = "") -> Loaded:
        """Raise the run's fence mark to the lease's fence and return the run with the first
        page of its journal after `after_event_id`. The first load of a run records the
        worker's `build_id` as the build that started it.

        The mark is committed before the read: from then on every earlier holder is fenced out.
        """
        async with self._pool.connection() as conn:
            params = {**fencing.lease_params(lease), "build_id": build_id}
            row = await fetch_one(conn, store.ADVANCE_FENCE, params)
            if row is None:
                raise await fencing.rejection(conn, lease)
            if row["status"] in OPEN_STATUSES and row["idle_loads"] > self._crash_loop_limit:
                await self._park_crash_loop(conn, lease, row["idle_loads"] - 1)
            return await self._page(conn, row, lease.workflow_id, after_event_id)

    async def next_page(self, lease: Lease, after_event_id: int) -> Loaded | None:
        """A later page of the journal under the fence that loaded the run: it only reads, and
        is no new load. None when the lease's fence is not the run's mark (or is not held):
        the caller loads instead, which raises the mark or says why it cannot."""
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, store.SELECT_LOADED_RUN, fencing.lease_params(lease))
            if row is None:
                return None
            return await self._page(conn, row, lease.workflow_id, after_event_id)

    async def _page(
        self, conn: AsyncConnection, run: Row, workflow_id: str, after_event_id: int
    ) -> Loaded:
        """The page of the journal after `after_event_id` of a run (`run`: its row as the load
        read it)."""
        params = {
            "workflow_id": workflow_id,
            "part": run["part"],  # its partition alone
            "after": after_event_id,
            "rows": PAGE_EVENTS,
            "budget": self._page_bytes,
        }
        rows = await fetch_all(conn, store.SELECT_JOURNAL_PAGE, params)
        events = [row for row in rows if row["event_id"] is not None]
        return Loaded(
            info=convert.workflow_info(run),
            events=[convert.history_event(event) for event in events],
            now=run["db_now"],
            clock=max(row["db_clock"] for row in rows),
            progress=convert.progress_rows(run["progress"]),
            more=bool(events) and events[0]["candidates"] > len(events),
            previous_fence=run["previous_fence"],
            history_length=run["event_count"],
            history_bytes=run["history_bytes"],
        )

    async def load_payload(self, lease: Lease, sha256: bytes) -> Payload:
        """A payload stored by content that an event of the lease's run names."""
        async with self._pool.connection() as conn:
            params = {**fencing.lease_params(lease), "sha256": sha256}
            row = await fetch_one(conn, store.LOAD_PAYLOAD, params)
            if row is None:
                raise await fencing.rejection(conn, lease)
        if row["data"] is None:
            raise errors.not_found(
                Reason.PAYLOAD_NOT_FOUND,
                f"no event of workflow {lease.workflow_id!r} names a payload with SHA-256 "
                f"{sha256.hex()}: ask only for the payload_ref of an event of this journal",
            )
        return Payload(encoding=row["payload_encoding"], data=bytes(row["data"]))

    async def _park_crash_loop(self, conn: AsyncConnection, lease: Lease, losses: int) -> None:
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
            workflow_id=lease.workflow_id,
            event_type=EventType.WORKFLOW_PARKED,
            fence=lease.fence,
            lease_key=lease.key,
            failure=failure,
        )
        params.update(status=str(RunStatus.PARKED))
        log.warning("parked workflow %s: %s", printable(lease.workflow_id), failure["message"])
        closed = await fetch_one(conn, store.CLOSE_RUN, params)
        if closed is not None:
            count_closed(closed["workflow_type"], RunStatus.PARKED)
        raise fencing.closed(lease.workflow_id, RunStatus.PARKED)

    async def finish(
        self, lease: Lease, outcome: Outcome, value: Payload | wf.Failure
    ) -> RunStatus:
        """Close the run as completed, failed, parked or cancelled, or continue it as new (by
        `outcome`)."""
        status = outcome.status
        params = store.event_params(
            workflow_id=lease.workflow_id,
            event_type=EventType(f"WORKFLOW_{status}"),  # only WORKFLOW_COMPLETED keeps the payload
            fence=lease.fence,
            lease_key=lease.key,
            payload=value if isinstance(value, Payload) else None,
            failure=convert.failure_to_dict(value) if isinstance(value, wf.Failure) else None,
        )
        params["status"] = str(status)
        # A caller waiting here for the result is handed the closed run: it reads nothing.
        awaited = outcome is not Outcome.CONTINUE_AS_NEW and self._awaited(lease.workflow_id)
        async with self._pool.connection() as conn:
            with timed_write(f"workflow_{status.lower()}"):
                if outcome is Outcome.CONTINUE_AS_NEW:
                    closed = await self._continue_as_new(conn, params)
                else:
                    close = store.CLOSE_RUN_RETURNING_IT if awaited else store.CLOSE_RUN
                    closed = await fetch_one(conn, close, params)
            if closed is not None:
                # Its watchers first (a caller waits for the result), then the relay, which
                # retires its tasks (or goes on with the next run).
                run = store.run_row(closed) if awaited else None
                self._on_committed(lease.workflow_id, True, closed=run)
                self._on_scheduled()
                count_closed(closed["workflow_type"], status)
                return status
            if outcome is Outcome.CONTINUE_AS_NEW:  # the run it closed is no longer the latest
                row = await fetch_one(
                    conn, chains.SELECT_CONTINUED, [lease.workflow_id, lease.fence]
                )
                seen = row is not None and fencing.may_see(row, lease.key)
                if seen and _closed_by(row, lease.fence, params):  # type: ignore[arg-type]
                    return status
            row = await fetch_one(conn, store.SELECT_CLOSE, [lease.workflow_id])
        if row is not None and fencing.may_see(row, lease.key) and row["fence"] == lease.fence:
            if _closed_by(row, lease.fence, params):
                return status  # a retried call whose first attempt committed
            if row["status"] not in OPEN_STATUSES:
                raise errors.failed_precondition(
                    Reason.WORKFLOW_CLOSED,
                    f"workflow {lease.workflow_id!r} is already {row['status'].lower()}, closed "
                    "by this lease with another outcome: a FinishWorkflow sent again must be "
                    "identical to the first (its result or failure is not changed)",
                )
        raise fencing.refusal(row, lease) or fencing.changed(lease.workflow_id)


def _closed_by(run: Row, fence: int, params: dict[str, Any]) -> bool:
    """Whether `run` (a SELECT_CLOSE row) was closed by this very close: the same lease, status,
    result and failure. Any other close of a closed run is refused, never acknowledged unstored."""
    asked = (
        fence,
        params["status"],
        params["payload"],
        params["payload_encoding"],
        plain(params["failure"]),
    )
    stored = (run["fence"], run["status"], run["result"], run["result_encoding"], run["failure"])
    return stored == asked


def _reuse_hint(status: str, policy: IdReusePolicy) -> str:
    """What a conflicting start may do about a closed last run its policy kept."""
    if status in OPEN_STATUSES:
        return ""
    return (
        f" (its last run is {status.lower()}, and the id reuse policy "
        f"{policy.name if policy else 'REFUSE'} makes no new run after that)"
    )
