"""Worker sessions of this replica and the loop that grants them due tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from opentelemetry.util.types import AttributeValue

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.common import namespaces
from perdure.common.aio import wait_event
from perdure.common.lease_proofs import LeaseProofs
from perdure.common.text import printable
from perdure.scheduler.builds import newest_builds
from perdure.scheduler.grants import ClaimFor
from perdure.scheduler.metrics import (
    BUDGET_EXCEEDED,
    HELD_BACK,
    LEASE_EXPIRIES,
    SCHEDULE_TO_START,
    STICKY_GRANTS,
    TIMER_LATENESS,
    USAGE_COST,
    USAGE_UNITS,
    WORKER_STREAMS,
)
from perdure.scheduler.model import Build, Grant, Lease, TaskKey, Usage
from perdure.scheduler.store import TaskStore
from perdure.telemetry.propagation import Carrier, context_from, current_carrier, untraced
from perdure.telemetry.spans import Tracer
from perdure.telemetry.timers import record_fire

log = logging.getLogger(__name__)
tracer = Tracer("perdure.scheduler")

# The grant loop sleeps until the next due time it knows of (a timer, a retry, a lease expiry),
# and wakes at once for new work, freed capacity and new sessions. It looks again at least this
# often, for work scheduled through another scheduler replica.
MAX_IDLE_SECONDS = 0.5
# Due times are judged by the database clock: waking a little late beats asking too early.
DUE_MARGIN_SECONDS = 0.002
# How long a stopping replica lets the grant round under way finish.
STOP_SECONDS = 5.0
# Why a listed lease is revoked: one answer, which tells a worker naming a lease it never held
# nothing about that lease.
LEASE_NOT_HELD = (
    "this session holds no live lease of this task with this fence (it expired and was "
    "granted again, was released, or was never this worker's); stop working on it"
)


class Held(NamedTuple):
    """A lease a session counts as its worker's."""

    fence: int
    since: float  # when it was granted or last renewed (monotonic clock)
    # Whether a reservation may stand for it, to settle at its TaskDone: a grant of the plain
    # claim never has one; a lease this session took over from another might.
    reserves: bool = True


@dataclass
class Session:
    """One connected worker stream."""

    identity: str
    task_queue: str
    workflow_types: list[str]
    step_types: list[str]
    capacity: int
    timer_lookahead: float = 0.0  # how early the worker takes timer tasks, in seconds
    key_id: str = ""  # the API key it authenticated with ("" without keys)
    sticky_id: str = ""  # its worker's cache of suspended runs ("" : it keeps none)
    build_id: str = ""  # the build of its worker's code ("": it declared none)
    build_seen: datetime | None = None  # when its build was first seen on its queue
    connected_at: float = field(default_factory=time.time)
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    leases: dict[TaskKey, Held] = field(default_factory=dict)
    outgoing: asyncio.Queue[tpb.ConnectResponse] = field(default_factory=asyncio.Queue)
    last_heard: float = field(default_factory=time.monotonic)

    def heard(self) -> None:
        """Note that the worker just sent something."""
        self.last_heard = time.monotonic()

    def responsive(self, within: float) -> bool:
        """Whether the worker spoke within `within` seconds. A paused worker keeps its
        connection open, so an open stream alone must not attract new tasks."""
        return time.monotonic() - self.last_heard <= within

    @property
    def free(self) -> int:
        """How many more tasks the worker can take."""
        return self.capacity - len(self.leases)

    def hold(self, lease: Lease, reserves: bool | None = None) -> None:
        """Count a lease as this worker's, as of now; `reserves` as Held's (None: as it was
        for this lease, else True)."""
        held = self.leases.get(lease.task)
        if reserves is None:
            reserves = held.reserves if held is not None and held.fence == lease.fence else True
        self.leases[lease.task] = Held(lease.fence, time.monotonic(), reserves)

    def drop(self, lease: Lease) -> None:
        """Stop counting a lease, if its fence matches."""
        held = self.leases.get(lease.task)
        if held is not None and held.fence == lease.fence:
            del self.leases[lease.task]

    def drop_unreported(self, reported: set[TaskKey], ttl: float) -> None:
        """Forget leases the worker stopped reporting a TTL ago: it let them expire (say, after
        a journal outage), so they must not hold its capacity forever. A grant still in flight
        is younger than that and stays."""
        stale_before = time.monotonic() - ttl
        for task, held in list(self.leases.items()):
            if task not in reported and held.since < stale_before:
                del self.leases[task]


class Dispatcher:
    """Grants due tasks to this replica's sessions with free capacity."""

    def __init__(
        self,
        store: TaskStore,
        lease_ttl: float,
        sticky_timeout: float = 0.0,
        proofs: LeaseProofs | None = None,
    ) -> None:
        self._store = store
        # Signs each grant for the key it goes to (None: grants carry no proof).
        self._proofs = proofs
        self.lease_ttl = lease_ttl
        # How long a due task waits for the worker that keeps its run (0: nobody keeps any).
        self.sticky_timeout = sticky_timeout
        self._sessions: dict[str, Session] = {}
        # The queues with flow settings (the flow claim's), as of `_flow_checked` (monotonic).
        self._flow_queues: set[str] = set()
        self._flow_checked = -math.inf
        # Seconds until a rate lets through a task the last round held back (None: none).
        self._rate_retry: float | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def sessions_on(self, task_queue: str) -> int:
        """How many sessions serve a queue here."""
        return sum(1 for s in self._sessions.values() if s.task_queue == task_queue)

    def add(self, session: Session) -> None:
        """Start granting tasks to a session."""
        self._sessions[session.session_id] = session
        WORKER_STREAMS.add(1, {"perdure.task_queue": session.task_queue})
        self.wake()

    def remove(self, session: Session) -> None:
        """Stop granting tasks to a session."""
        if self._sessions.pop(session.session_id, None) is not None:
            WORKER_STREAMS.add(-1, {"perdure.task_queue": session.task_queue})

    def move(self, session: Session, reason: str) -> None:
        """Grant a session nothing more and ask its worker to reconnect (elsewhere, as the
        channel's round-robin picks): after the tasks already on their way, it gets Reconnect.
        Its leases stay its worker's."""
        if session.session_id in self._sessions:
            log.info("asking worker %s to reconnect: %s", session.identity, reason)
            self.remove(session)
            session.outgoing.put_nowait(tpb.ConnectResponse(reconnect=tpb.Reconnect(reason=reason)))

    def wake(self) -> None:
        """Look for grantable tasks now rather than at the next tick."""
        self._wake.set()

    def flow_arrived(self, task_queues: set[str]) -> None:
        """Tasks with flow settings were made due on these queues: claim them with flow."""
        self._flow_queues |= task_queues

    async def task_done(
        self,
        session: Session,
        lease: Lease,
        unfinished: bool,
        sticky: bool = False,
        usage: Usage | None = None,
    ) -> None:
        """The worker is finished with a lease (`unfinished`: it handed the task back, to be
        granted again at once; `sticky`: it keeps the run's state, and is offered its next
        task first). A step lease's reservation is settled at what the worker reported
        (`usage`; None: at its estimate). A lease the session does not hold stays as it is,
        its reservation too (settled at its estimate once the lease has ended)."""
        held = session.leases.get(lease.task)
        if lease.step_id and held is not None and held.fence == lease.fence and held.reserves:
            await self._store.settle(lease, *(usage or (None, None)))
            if usage is not None:
                queue = {"perdure.task_queue": session.task_queue}
                USAGE_UNITS.add(usage.units, queue)
                USAGE_COST.add(usage.cost, queue)
        session.drop(lease)
        keeps = _keeps(session, lease, unfinished, sticky, self.sticky_timeout)
        if await self._store.release(session.session_id, lease, unfinished, keeps):
            self.wake()
            return
        log.debug(
            "ignored TaskDone of %s (fence %d) from %s: not a lease of this session",
            _task_name(lease.workflow_id, lease.step_id),
            lease.fence,
            session.identity,
        )

    async def heartbeat(self, session: Session, held: list[Lease]) -> None:
        """Renew the session's leases the worker lists; tell it about those it does not hold."""
        renewed = await self._store.renew(session.session_id, held, self.lease_ttl)
        await self._settle(session, held, renewed)

    async def adopt(self, session: Session, held: list[Lease]) -> None:
        """Take over the leases a new session's worker still holds from an earlier session (its
        hello lists them): those of the same API key and task queue; tell it about the rest."""
        adopted = await self._store.adopt(
            session.session_id, held, self.lease_ttl, session.key_id, session.task_queue
        )
        await self._settle(session, held, adopted)

    async def _settle(self, session: Session, held: list[Lease], renewed: set[Lease]) -> None:
        """Count the renewed leases as the session's; revoke the others it listed. The
        revocation says the same whatever became of a lease, or whoever holds it."""
        session.drop_unreported({lease.task for lease in held}, self.lease_ttl)
        for lease in held:
            if lease in renewed:
                session.hold(lease)
                continue
            session.drop(lease)
            workflow_id, step_id, fence = lease
            log.info(
                "lease of %s (fence %d) is not held by %s; revoking it",
                _task_name(workflow_id, step_id),
                fence,
                session.identity,
            )
            revoked = tpb.LeaseRevoked(
                lease=tpb.LeaseRef(workflow_id=workflow_id, fence=fence, step_id=step_id),
                reason=LEASE_NOT_HELD,
            )
            await session.outgoing.put(tpb.ConnectResponse(lease_revoked=revoked))

    def start(self) -> None:
        """Run the grant loop in the background."""
        self._task = asyncio.create_task(self._run(), name="dispatcher")

    async def stop(self) -> None:
        """Stop granting (after the round under way: a claim cut short would leave leases
        nobody knows of to expire) and move every session to another replica."""
        self._stopping = True
        self.wake()
        if self._task is not None:
            # A round stuck on an unreachable database is cut short (what it may have
            # claimed then waits for its lease to expire).
            await asyncio.wait({self._task}, timeout=STOP_SECONDS)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for session in list(self._sessions.values()):
            self.move(session, "this scheduler replica is shutting down")

    async def _run(self) -> None:
        delay = 0.0
        overdue_rounds = 0
        while True:
            await wait_event(self._wake, delay)
            self._wake.clear()
            if self._stopping:
                return
            try:
                with untraced():  # polls; each grant gets a span in its workflow's trace
                    await self._check_flow()
                    granted = await self._grant_round()
                    if self._wake.is_set():
                        continue  # more to grant already (or new work): the next can wait
                    due_in = await self._next_due()
            except Exception:
                log.exception("granting tasks failed; retrying shortly")
                delay = MAX_IDLE_SECONDS
                continue
            if self._rate_retry is not None:
                delay = min(self._rate_retry + DUE_MARGIN_SECONDS, MAX_IDLE_SECONDS)
            elif due_in is None:
                delay = MAX_IDLE_SECONDS
            elif due_in > 0:
                delay = min(due_in + DUE_MARGIN_SECONDS, MAX_IDLE_SECONDS)
                overdue_rounds = 0
            else:
                # Overdue but not granted: it may have become due just after the claim (look
                # again at once), or no session can take it now (wait for capacity or a tick).
                overdue_rounds = 0 if granted else overdue_rounds + 1
                delay = 0.0 if overdue_rounds <= 1 else MAX_IDLE_SECONDS

    def sessions(self) -> list[Session]:
        """The sessions connected here."""
        return list(self._sessions.values())

    def newest_builds(self) -> dict[tuple[str, str], str]:
        """Per (task queue, workflow type) served here, its newest build (builds.py). A
        draining session is leaving: its build is no candidate."""
        return newest_builds(s for s in self._sessions.values() if s.capacity > 0)

    def serves(self, sticky_id: str) -> bool:
        """Whether a session of the worker `sticky_id` is connected here."""
        return any(s.sticky_id == sticky_id for s in self._sessions.values())

    def _ready(self) -> list[Session]:
        return [s for s in self._sessions.values() if s.free > 0 and s.responsive(self.lease_ttl)]

    async def _next_due(self) -> float | None:
        ready = self._ready()
        queues = sorted({session.task_queue for session in ready})
        if not queues:
            return None
        # The least lookahead: waking for a timer that no ready session may take yet would
        # leave it to the idle look, late.
        lookahead = min(session.timer_lookahead for session in ready)
        # A task kept for a worker that is not ready here is due to the others only later.
        sticky_ids = sorted({session.sticky_id for session in ready if session.sticky_id})
        return await self._store.next_due(queues, lookahead, sticky_ids, self.sticky_timeout)

    async def _check_flow(self) -> None:
        """Every idle period: learn which queues have flow settings (made due through another
        replica, say), and settle at their estimates the reservations whose lease ended
        without a report."""
        if time.monotonic() - self._flow_checked < MAX_IDLE_SECONDS:
            return
        self._flow_checked = time.monotonic()
        self._flow_queues |= await self._store.flow_queues()
        if self._flow_queues:
            await self._store.settle_ended()

    async def _grant_round(self) -> int:
        """Grant due tasks to every ready session; return how many were granted."""
        granted = 0
        newest = self.newest_builds()
        self._rate_retry = None
        for session in self._ready():
            claim = ClaimFor(
                session.session_id,
                session.task_queue,
                session.workflow_types,
                session.step_types,
                session.free,
                self.lease_ttl,
                session.timer_lookahead,
                session.key_id,
                session.sticky_id,
                self.sticky_timeout,
                _build(session, newest),
            )
            if session.task_queue in self._flow_queues:
                claimed = await self._store.claim_flow(claim)
                grants = claimed.grants
                queue = {"perdure.task_queue": session.task_queue}
                for reason, count in claimed.held_back.items():
                    HELD_BACK.add(count, {**queue, "perdure.flow.held_by": reason})
                if claimed.retry_in is not None:
                    earlier = self._rate_retry if self._rate_retry is not None else math.inf
                    self._rate_retry = min(earlier, claimed.retry_in)
            else:
                grants = await self._store.claim_plain(claim)
            if session.session_id not in self._sessions:
                # The worker left or is moving: it never hears of these grants.
                for grant in grants:
                    await self._store.release(session.session_id, grant.lease, again=True)
                continue
            granted += len(grants)
            for grant in grants:
                session.hold(grant.lease, reserves=grant.reserves)
                task = tpb.Task(
                    workflow_id=grant.workflow_id,
                    fence=grant.fence,
                    trace_context=_traced_grant(session, grant),
                )
                task.lease_expire_time.FromDatetime(grant.lease_expires_at)
                if self._proofs is not None and session.key_id:
                    task.lease_proof = self._proofs.sign(
                        grant.workflow_id,
                        grant.step_id,
                        grant.fence,
                        session.key_id,
                        grant.lease_expires_at.timestamp(),
                    )
                if grant.step_id:
                    task.step_id, task.step_type = grant.step_id, grant.task_type
                    task.budget_exceeded = grant.budget_exceeded
                    if grant.budget_exceeded:
                        BUDGET_EXCEEDED.add(1, {"perdure.task_queue": session.task_queue})
                else:
                    task.workflow_type = grant.task_type
                await session.outgoing.put(tpb.ConnectResponse(task=task))
            if grants and session.free > 0:
                self.wake()  # more may be due
        return granted


def _build(session: Session, newest: dict[tuple[str, str], str]) -> Build:
    """What routing by build needs of a session, given the newest build of each type."""
    return Build(
        namespace=namespaces.namespace_of(session.task_queue),
        build_id=session.build_id,
        newest_types=[
            t
            for t in session.workflow_types
            if newest.get((session.task_queue, t)) == session.build_id
        ],
    )


def _traced_grant(session: Session, grant: Grant) -> Carrier:
    """Measure a grant and give it spans in its workflow's trace: the expiry it takes over
    from, or the timer that fired, then the grant itself, whose context the task carries."""
    workflow = context_from(grant.trace_context or {})
    queue = {"perdure.task_queue": session.task_queue}
    attributes: dict[str, AttributeValue] = {
        "perdure.workflow.id": grant.workflow_id,
        **queue,
        "perdure.fence": grant.fence,
    }
    if grant.step_id:
        attributes.update({"perdure.step.id": grant.step_id, "perdure.step.type": grant.task_type})
    else:
        attributes["perdure.workflow.type"] = grant.task_type
    SCHEDULE_TO_START.record(max(grant.late_by, 0.0), queue)
    if grant.sticky_id is not None:
        outcome = "kept" if grant.sticky_id == session.sticky_id else "timed_out"
        STICKY_GRANTS.add(1, {**queue, "perdure.sticky.outcome": outcome})
    if grant.late_by < 0:
        # Granted ahead of its timer: the worker fires it, and measures how late, itself.
        attributes["perdure.timer.ahead_ms"] = round(-grant.late_by * 1000, 3)
    elif grant.previous_owner is not None:
        log.info(
            "lease of %s expired (holder %s); taking over with fence %d",
            _task_name(grant.workflow_id, grant.step_id),
            grant.previous_owner,
            grant.fence,
        )
        LEASE_EXPIRIES.add(1, queue)
        expired = {**attributes, "perdure.fence": grant.fence - 1}
        expired["perdure.lease.owner"] = grant.previous_owner
        tracer.start_span("perdure.lease.expire", workflow, attributes=expired).end()
    elif grant.due_reason:
        record_fire(
            tracer,
            TIMER_LATENESS,
            grant.due_reason,
            grant.due_at,
            grant.late_by,
            attributes,
            workflow,
        )
    granted = {
        **attributes,
        "perdure.worker.identity": session.identity,
        "perdure.lease.takeover": grant.previous_owner is not None,
    }
    with tracer.start_as_current_span("perdure.lease.grant", workflow, attributes=granted):
        return current_carrier()


def _keeps(
    session: Session, lease: Lease, unfinished: bool, sticky: bool, timeout: float
) -> str | None:
    """The worker a finished task's run is kept for: the session's, when its TaskDone says
    so. A step task, a task handed back, a worker with no sticky id or draining, or stickiness
    turned off (timeout 0) keep nothing: TaskDone.sticky is then ignored."""
    keeps = session.sticky_id and session.capacity > 0 and timeout > 0
    if sticky and keeps and not unfinished and not lease.step_id:
        return session.sticky_id
    return None


def _task_name(workflow_id: str, step_id: str) -> str:
    """A task as logs name it: the workflow, or "<workflow>/<step>" for a step task (ids that
    workers chose, made printable)."""
    return printable(f"{workflow_id}/{step_id}" if step_id else workflow_id)
