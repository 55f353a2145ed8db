"""Timers and waits: a timer is journaled with the time it fires (TIMER_STARTED); a run that
waits (for a timer, a retry, a signal or a remote step) suspends, and a timed wait schedules its
wake-up through the outbox at that time, in the same statement: the scheduler hands the run out
again when it is due, and its code, replaying, finds the timer fired."""

from __future__ import annotations

from datetime import datetime

from perdure.history import fencing, store
from perdure.history.appends import JournalBase
from perdure.history.metrics import timed_write
from perdure.history.model import Appended, Call, EventType, Lease, StepRecord, Wait
from perdure.history.rows import fetch_one


class Timers(JournalBase):
    """Starting timers and suspending runs until what they wait for."""

    async def start_timer(
        self, call: Call, *, due_at: datetime | None = None, due_in: float | None = None
    ) -> Appended:
        """Journal a timer firing at `due_at`, or `due_in` seconds from now (the database's
        clock); the answer carries the time it fires."""
        record = StepRecord(EventType.TIMER_STARTED, due_at=due_at, due_in=due_in)
        return await self.record(call, record)

    async def suspend(self, lease: Lease, wait: Wait) -> None:
        """Mark the run waiting and schedule its wake-up at `wait.until` (if any)."""
        until = wait.until
        params = store.event_params(
            workflow_id=lease.workflow_id,
            fence=lease.fence,
            lease_key=lease.key,
            event_type=EventType.WORKFLOW_SUSPENDED,
            wait={
                "kind": str(wait.kind),
                "name": wait.name,
                "until": until.isoformat() if until else None,
            },
            run_at=until,
            wake=until is not None,
            wake_reason=wait.kind.wake_reason if until is not None else None,
        )
        params.update(wait_kind=str(wait.kind), wait_name=wait.name)
        async with self._pool.connection() as conn:
            with timed_write("workflow_suspended"):
                suspended = await fetch_one(conn, store.SUSPEND, params)
            if suspended is None:
                raise await fencing.rejection(conn, lease)
        if until is not None:
            self._on_scheduled()
