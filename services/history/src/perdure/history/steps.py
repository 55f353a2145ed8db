"""Steps: an attempt's heartbeat (its progress, under the run's lease or a remote step's own),
and a remote step's task: scheduled by the run's call, loaded by its executor (which starts an
attempt), its attempts recorded under the step's lease, a failed one making the step due again
at its retry time (see retries.py)."""

from __future__ import annotations

from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common.reasons import Reason
from perdure.history import fencing, store
from perdure.history.appends import JournalBase
from perdure.history.metrics import count_model_usage, timed_write
from perdure.history.model import (
    OPEN_STATUSES,
    Appended,
    Call,
    EventType,
    Lease,
    RemoteStep,
    StepAttempt,
    StepTask,
)
from perdure.history.rows import fetch_one, payload_columns, payload_in, payload_of


class Steps(JournalBase):
    """Heartbeats and remote steps' tasks."""

    async def heartbeat(
        self, lease: Lease, step_id: str, attempt: int, details: Payload | None
    ) -> bool:
        """Keep a step attempt's latest progress; returns whether a cancel was requested. A
        lease with a step id is the remote step's own (`step_id` is then the same)."""
        params = {
            **fencing.lease_params(lease),
            "step_id": step_id,
            "attempt": attempt,
            **payload_columns("details", details),
        }
        query = store.RECORD_STEP_HEARTBEAT if lease.step_id else store.RECORD_HEARTBEAT
        async with self._pool.connection() as conn:
            with timed_write("heartbeat"):
                row = await fetch_one(conn, query, params)
            if row is None:
                raise await fencing.rejection(conn, lease)
        return bool(row["cancel_requested"])

    async def schedule_step(self, call: Call, step: RemoteStep) -> Appended:
        """Journal a remote step's call and make its step task due, in one transaction; the
        same call sent again is a no-op."""
        params = store.event_params(
            workflow_id=call.workflow_id,
            fence=call.fence,
            lease_key=call.lease.key,
            event_type=EventType.STEP_SCHEDULED,
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
            step_flow=step.flow,
        )
        async with self._pool.connection() as conn:
            try:
                with timed_write("step_scheduled"):
                    row = await fetch_one(conn, store.SCHEDULE_STEP, params)
            except UniqueViolation:
                return await self._existing_call(conn, call, params)
            if row is None:
                raise await fencing.rejection(conn, call.lease)
        self._on_scheduled()
        return Appended(row["event_id"], None, row["cancel_requested"])

    async def load_step(self, lease: Lease) -> StepTask:
        """Raise a remote step's fence mark to the lease's fence and return what to execute.
        A closed step or run is FAILED_PRECONDITION: nothing to do."""
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, store.LOAD_STEP, fencing.lease_params(lease))
            if row is None:
                raise await fencing.rejection(conn, lease)
        if row["status"] not in OPEN_STATUSES:
            raise fencing.closed(lease.workflow_id, row["status"])
        if row["closed"]:
            raise fencing.step_closed(lease.workflow_id, lease.step_id)
        return StepTask(
            workflow_type=row["workflow_type"],
            step_type=row["step_type"],
            input_value=payload_in(row, "input"),
            attempt=row["attempt"],
            attempt_lost=row["attempt_lost"],
            retry=row["retry"],
            timeout_seconds=row["timeout_seconds"],
            heartbeat_timeout_seconds=row["heartbeat_timeout_seconds"],
            heartbeat_details=payload_of(row, "heartbeat_details"),
        )

    async def record_step_attempt(self, attempt: StepAttempt) -> Appended:
        """Record an attempt of a remote step under its step task's lease: a failed attempt
        makes the step task due at the retry; a final outcome closes the step and wakes the
        run. The same record sent again (its answer was lost) is a no-op."""
        lease = attempt.lease
        final = attempt.event_type != EventType.STEP_ATTEMPT_FAILED
        params = store.event_params(
            workflow_id=lease.workflow_id,
            fence=lease.fence,
            lease_key=lease.key,
            event_type=attempt.event_type,
            step_id=lease.step_id,
            attempt=attempt.attempt,
            payload=attempt.payload,
            failure=attempt.failure,
            due_in=attempt.retry_in,
            started_at=attempt.started_at,
            usage=attempt.usage,
        )
        params["final"] = final
        call = Call(lease, lease.step_id, "", 0)
        async with self._pool.connection() as conn:
            try:
                with timed_write(attempt.event_type.lower()):
                    row = await fetch_one(conn, store.RECORD_STEP_TASK, params)
            except UniqueViolation:  # this failed attempt is recorded already
                return await self._existing_call(conn, call, params)
            if row is None:
                rejection = await fencing.rejection(conn, lease)
                if final and rejection.reason == Reason.STEP_CLOSED:
                    # Recorded already, if it is this very outcome (a retried request).
                    return await self._existing_call(conn, call, params, remote_outcome=True)
                raise rejection
        count_model_usage(attempt.usage)
        if final:
            self._on_scheduled()
        return Appended(row["event_id"], row["due_at"], row["cancel_requested"])
