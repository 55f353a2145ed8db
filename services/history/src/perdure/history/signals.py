"""Signals: received from outside the run (deduplicated by their signal id) and consumed by
its code (each signal once, marked in the statement that records the consumption)."""

from __future__ import annotations

from collections import Counter

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg.pq import TransactionStatus

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common import errors
from perdure.common.db import transaction_if
from perdure.common.reasons import Reason
from perdure.history import fencing, store
from perdure.history.appends import JournalBase, link_workflow
from perdure.history.metrics import timed_write
from perdure.history.model import OPEN_STATUSES, Appended, Call, EventType
from perdure.history.rows import fetch_all, fetch_one
from perdure.telemetry.propagation import current_carrier
from perdure.telemetry.spans import Tracer

tracer = Tracer("perdure.history")

# How many times a signal follows its workflow id to a newer run before giving up.
_RUN_CHANGES = 5


class Signals(JournalBase):
    """Receiving and consuming signals."""

    async def signal(
        self, workflow_id: str, name: str, payload: Payload, signal_id: str | None
    ) -> bool:
        """Journal a signal and wake the run; False when its id was already received."""
        async with self._pool.connection() as conn:
            return await self._signal(conn, workflow_id, name, payload, signal_id)

    async def _signal(
        self,
        conn: AsyncConnection,
        workflow_id: str,
        name: str,
        payload: Payload,
        signal_id: str | None,
    ) -> bool:
        """Receive a signal on `conn`. Its id is the dedupe key: events' unique (workflow_id,
        signal_id) refuses a second one, sent concurrently or later, and it is answered as
        not accepted rather than as an error."""
        attributes = {"perdure.workflow.id": workflow_id, "perdure.signal.name": name}
        if signal_id:
            attributes["perdure.signal.id"] = signal_id
        with tracer.start_as_current_span("perdure.signal.receive", attributes=attributes) as span:
            params = store.event_params(
                workflow_id=workflow_id,
                event_type=EventType.SIGNAL_RECEIVED,
                name=name,
                payload=payload,
                signal_id=signal_id,
                wake=True,
                trace_context=current_carrier(),  # the consuming span links back to this one
            )
            # A run that continues as new while the signal waits for its row lock is no longer
            # under its key when the wait ends: the signal goes to the next run, read afresh.
            for _ in range(_RUN_CHANGES):
                try:
                    # A savepoint inside a SignalWithStart's transaction, so that a duplicate
                    # id does not abort its start.
                    in_transaction = conn.info.transaction_status != TransactionStatus.IDLE
                    async with transaction_if(conn, in_transaction):
                        with timed_write("signal_received"):
                            row = await fetch_one(conn, store.SIGNAL, params)
                except UniqueViolation:
                    return False  # the same id, sent concurrently
                if row is not None:
                    link_workflow(span, row)
                    self._on_scheduled()
                    return True
                if signal_id and await fetch_one(
                    conn, store.SELECT_SIGNAL, {"workflow_id": workflow_id, "signal_id": signal_id}
                ):
                    span.set_attribute("perdure.signal.accepted", False)
                    return False
                current = await self._require(conn, workflow_id)
                if current["status"] not in OPEN_STATUSES:
                    break
            span.set_attribute("perdure.signal.accepted", False)
        raise fencing.closed(workflow_id, current["status"])

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
            lease_key=call.lease.key,
            event_type=EventType.SIGNAL_CONSUMED,
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
                    row = await fetch_one(conn, store.CONSUME_SIGNALS, params)
            except UniqueViolation:  # this call is recorded, or a signal was consumed meanwhile
                row = None
            if row is not None:
                return Appended(row["event_id"], row["due_at"], row["cancel_requested"])
            lease = await fetch_one(conn, fencing.SELECT_RUN_LEASE, [call.workflow_id])
            if (refusal := fencing.refusal(lease, call.lease)) is not None:
                raise refusal
            keys = {"workflow_id": call.workflow_id, "step_id": call.step_id}
            recorded = await fetch_one(
                conn, store.SELECT_STEP_EVENT, keys | {"position": call.position}
            )
            if recorded is not None:  # the same call again, or a conflict at this call
                return await self._existing_call(conn, call, params)
            raise await _unconsumable(conn, call.workflow_id, event_ids)


async def _unconsumable(
    conn: AsyncConnection, workflow_id: str, event_ids: list[int]
) -> errors.ApiError:
    """Why a consumption under a good lease was refused: which of the ids it names are named
    twice, are not signals of the run, or are consumed already."""
    twice = sorted(i for i, times in Counter(event_ids).items() if times > 1)
    if twice:
        return errors.invalid_argument(
            f"event_ids names {_ids(twice)} more than once: each signal is consumed once"
        )
    rows = await fetch_all(
        conn, store.SELECT_SIGNALS_NAMED, {"workflow_id": workflow_id, "event_ids": event_ids}
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
            Reason.SIGNAL_ALREADY_CONSUMED,
            f"signal events {_ids(taken)} of workflow {workflow_id!r} are consumed already; "
            "replay the journal instead of re-running the call",
        )
    return fencing.changed(workflow_id)


def _ids(event_ids: list[int]) -> str:
    return ", ".join(str(i) for i in event_ids[:20]) + (", ..." if len(event_ids) > 20 else "")
