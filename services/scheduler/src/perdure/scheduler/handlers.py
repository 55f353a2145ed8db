"""gRPC servicers of the scheduler: worker streams and the internal scheduling API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Iterable
from datetime import UTC
from typing import Any

import grpc
from google.protobuf import duration_pb2

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.common import errors, namespaces
from perdure.common.auth import current_principal, permission_denied
from perdure.common.builds import build_id_of
from perdure.common.convert import seconds_of
from perdure.common.limits import StreamCap
from perdure.common.text import printable, require_storable
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc
from perdure.scheduler.builds_api import BuildsApi
from perdure.scheduler.dispatcher import Dispatcher, Session
from perdure.scheduler.flow.convert import run_budget_of, task_flow_of, usage_of
from perdure.scheduler.flow_api import FlowApi
from perdure.scheduler.model import DEBOUNCE, REOPEN, DueReason, DueTask, Lease
from perdure.scheduler.pauses_api import PausesApi
from perdure.scheduler.sticky import sticky_id_of
from perdure.scheduler.store import TaskStore
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
MAX_CAPACITY = 10_000
MAX_TIMER_LOOKAHEAD_SECONDS = 1.0
MAX_IDLE_QUERY = 1000  # runs per FindIdleRuns
DUE_REASONS = tuple(DueReason)
# How long a worker asked to reconnect gets to half-close its stream before it is ended (a
# worker that ignores Reconnect then finds the stream closed, and reconnects all the same).
HANDOVER_SECONDS = 5.0
# A worker's cancel can reach the stream's reader (as its end) before it reaches the handler
# (gRPC cancels the handler's task a moment later): how long an ended stream waits for that
# cancel before its end counts as a goodbye.
CANCEL_SETTLE_SECONDS = 0.2


def _namespace_of_session(hello: tpb.Hello) -> str:
    """The namespace a session serves: its worker key's, or the one it names without keys."""
    principal = current_principal.get()
    if principal is None:
        return namespaces.resolve(hello.namespace)
    if hello.namespace and hello.namespace != principal.namespace:
        raise permission_denied(
            f"worker key {principal.key_id} belongs to namespace {principal.namespace!r}; it "
            f"cannot serve namespace {hello.namespace[:70]!r}"
        )
    if not principal.serves(hello.task_queue):
        raise permission_denied(
            f"worker key {principal.key_id} may serve task queues "
            f"{', '.join(principal.task_queues)}; not {hello.task_queue[:70]!r}"
        )
    return principal.namespace


def _session_from_hello(message: tpb.ConnectRequest) -> Session:
    if message.WhichOneof("message") != "hello":
        raise errors.invalid_argument("the first message on a worker stream must be hello")
    hello = message.hello
    if not hello.task_queue:
        raise errors.invalid_argument("hello.task_queue is required")
    namespaces.require_public("hello.task_queue", hello.task_queue)
    types = [*hello.workflow_types, *hello.step_types]
    if not types or any(not t for t in types):
        raise errors.invalid_argument(
            "hello must list at least one workflow or step type (workflow_types, step_types), "
            "none of them empty"
        )
    require_storable("hello.identity", hello.identity)
    require_storable("hello.task_queue", hello.task_queue)
    for type_name in types:
        require_storable("a declared type name", type_name)
    if not 1 <= hello.capacity <= MAX_CAPACITY:
        raise errors.invalid_argument(f"hello.capacity must be between 1 and {MAX_CAPACITY}")
    lookahead = seconds_of("hello.timer_lookahead", hello.timer_lookahead)
    if not 0 <= lookahead <= MAX_TIMER_LOOKAHEAD_SECONDS:
        raise errors.invalid_argument(
            f"hello.timer_lookahead must be between 0 and {MAX_TIMER_LOOKAHEAD_SECONDS} s"
        )
    principal = current_principal.get()
    return Session(
        key_id=principal.key_id if principal is not None else "",
        # For operators only, in logs and spans: made printable once, here.
        identity=printable(hello.identity) or "unnamed-worker",
        task_queue=namespaces.qualify(_namespace_of_session(hello), hello.task_queue),
        workflow_types=sorted(set(hello.workflow_types)),
        step_types=sorted(set(hello.step_types)),
        capacity=hello.capacity,
        timer_lookahead=lookahead,
        sticky_id=sticky_id_of(hello.sticky_id),
        build_id=build_id_of("hello.build_id", hello.build_id),
    )


def _leases(session: Session, refs: Iterable[tpb.LeaseRef]) -> list[Lease]:
    """The leases a message names, each of the session's namespace."""
    namespace = namespaces.namespace_of(session.task_queue)
    return [_lease_ref(ref, namespace) for ref in refs]


def _lease_ref(ref: tpb.LeaseRef, namespace: str | None) -> Lease:
    """A lease a worker names, checked: storable ids, in `namespace` (None: any)."""
    require_storable("a lease's workflow_id", ref.workflow_id)
    require_storable("a lease's step_id", ref.step_id)
    if namespace is not None and namespaces.namespace_of(ref.workflow_id) != namespace:
        raise permission_denied(
            f"lease of {ref.workflow_id[:100]!r} is outside the namespace {namespace!r}"
        )
    return Lease(ref.workflow_id, ref.step_id, ref.fence)


def due_tasks(request: spb.EnqueueTasksRequest) -> list[DueTask]:
    """The tasks a scheduling request makes due, each checked."""
    for t in request.tasks:
        if not (t.workflow_id and t.workflow_type and t.task_queue):
            raise errors.invalid_argument("every task needs workflow_id, type and task_queue")
        if t.fence_floor < 0:
            raise errors.invalid_argument("fence_floor must not be negative")
        if t.run_number < 0:
            raise errors.invalid_argument("run_number must not be negative")
        if t.wake_reason and t.wake_reason not in (*DUE_REASONS, REOPEN, DEBOUNCE):
            raise errors.invalid_argument(
                f"wake_reason must be empty or one of "
                f"{', '.join((*DUE_REASONS, REOPEN, DEBOUNCE))}, not "
                f"{t.wake_reason[:40]!r}"
            )
    return [
        DueTask(
            workflow_id=t.workflow_id,
            step_id=t.step_id,
            task_type=t.workflow_type,
            task_queue=t.task_queue,
            run_at=t.run_time.ToDatetime(tzinfo=UTC) if t.HasField("run_time") else None,
            due_reason=DueReason(t.wake_reason) if t.wake_reason in DUE_REASONS else None,
            trace_context=dict(t.trace_context) or None,
            fence_floor=t.fence_floor,
            run_number=max(t.run_number, 1),
            reopens=t.wake_reason == REOPEN,
            flow=task_flow_of(t) if t.HasField("flow") else None,
            run_budget=run_budget_of(t.flow) if t.flow.HasField("run_budget") else None,
            delays=t.wake_reason == DEBOUNCE,
        )
        for t in request.tasks
    ]


def _duration(seconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromMilliseconds(int(seconds * 1000))
    return duration


class TaskServicer(tgrpc.TaskServiceServicer):
    """One bidirectional stream per worker: tasks out, heartbeats and results in."""

    def __init__(
        self,
        store: TaskStore,
        dispatcher: Dispatcher,
        message_rate: float,
        session_max_age: float,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._message_rate = message_rate
        self._session_max_age = session_max_age  # 0: sessions stay until they end

    async def Connect(
        self, request_iterator: Any, context: Context
    ) -> AsyncIterator[tpb.ConnectResponse]:
        try:
            first = await context.read()
            if first is grpc.aio.EOF:
                return
            session = _session_from_hello(first)
            held = _leases(session, first.hello.leases)
        except errors.ApiError as error:
            await errors.abort_with(context, error)
            return
        await self._store.register_types(session.task_queue, session.workflow_types)
        session.build_seen = await self._store.register_build(
            session.task_queue,
            namespaces.namespace_of(session.task_queue),
            session.build_id,
            session.workflow_types,
        )
        ttl = self._dispatcher.lease_ttl
        yield tpb.ConnectResponse(
            welcome=tpb.Welcome(
                session_id=session.session_id,
                lease_ttl=_duration(ttl),
                heartbeat_interval=_duration(ttl / 3),
            )
        )
        log.info(
            "worker %s connected (build %s, queue %s, workflow types %s, step types %s, "
            "capacity %d)",
            session.identity,
            printable(session.build_id) or "-",
            printable(session.task_queue),
            printable(",".join(session.workflow_types)) or "-",
            printable(",".join(session.step_types)) or "-",
            session.capacity,
        )
        await self._dispatcher.adopt(session, held)
        reader = asyncio.create_task(self._read(session, context))
        outgoing: asyncio.Future[tpb.ConnectResponse] | None = None
        self._dispatcher.add(session)
        aging = self._age(session)
        # Only a goodbye (the worker half-closes the stream) releases the session's leases at
        # once. A stream that breaks (a dead worker, a cut link, a malformed message) leaves
        # them to expire or to the worker's next hello: its steps may still be running.
        goodbye = False
        try:
            while True:
                outgoing = asyncio.ensure_future(session.outgoing.get())
                await asyncio.wait({outgoing, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not outgoing.done():
                    try:
                        reader.result()  # the worker half-closed the stream, or reading failed
                        # A cancelled stream may read as ended too: only a half-close of a
                        # stream still alive is a goodbye. A cancel interrupts this wait.
                        await asyncio.sleep(CANCEL_SETTLE_SECONDS)
                        goodbye = not context.cancelled()
                    except errors.ApiError as error:  # a malformed message
                        await errors.abort_with(context, error)
                    return
                message = outgoing.result()
                yield message
                if message.WhichOneof("message") == "reconnect":
                    # The worker keeps its leases; it half-closes once it reads Reconnect, and
                    # what it sent until then (a TaskDone, say) is still handled.
                    await asyncio.wait({reader}, timeout=HANDOVER_SECONDS)
                    return
        finally:
            if aging is not None:
                aging.cancel()
            reader.cancel()
            if outgoing is not None:
                outgoing.cancel()
            # Shielded: the stream may be cancelled while the release is under way, and the
            # release must still happen.
            await asyncio.shield(self._close(session, goodbye))

    def _age(self, session: Session) -> asyncio.TimerHandle | None:
        """Move the session once it reaches the max age (give or take a tenth, so that sessions
        opened together do not all move together): new scheduler replicas get their share."""
        if not self._session_max_age:
            return None
        return asyncio.get_running_loop().call_later(
            self._session_max_age * random.uniform(0.9, 1.1),
            self._dispatcher.move,
            session,
            "the session reached its max age",
        )

    async def _read(self, session: Session, context: Context) -> None:
        """Handle what the worker sends until it closes the stream."""
        cap = StreamCap(self._message_rate, "TaskService.Connect")
        with untraced():  # heartbeats every few seconds would bury the stream's span
            while (message := await context.read()) is not grpc.aio.EOF:
                cap.count()
                session.heard()
                await self._handle(session, message)

    async def _handle(self, session: Session, message: tpb.ConnectRequest) -> None:
        kind = message.WhichOneof("message")
        if kind == "heartbeat":
            await self._dispatcher.heartbeat(session, _leases(session, message.heartbeat.leases))
        elif kind == "task_done":
            done = message.task_done
            [lease] = _leases(session, [done.lease])
            usage = usage_of(done.usage) if done.HasField("usage") else None
            await self._dispatcher.task_done(session, lease, done.unfinished, done.sticky, usage)
        elif kind == "drain":
            session.capacity = 0
            log.info("worker %s is draining", session.identity)
            if session.sticky_id:  # it drops its cache: its kept runs go to any worker now
                await self._store.forget_worker(session.sticky_id)
        else:
            log.warning("ignoring unexpected %s from worker %s", kind, session.identity)

    async def _close(self, session: Session, goodbye: bool) -> None:
        self._dispatcher.remove(session)
        if not goodbye:
            if session.leases:
                log.info(
                    "stream of worker %s broke; its %d lease(s) stand until they expire or it "
                    "reconnects",
                    session.identity,
                    len(session.leases),
                )
            return
        with contextlib.suppress(Exception):
            released = await self._store.release_session(session.session_id)
            log.info(
                "worker %s said goodbye; released %d lease(s)", session.identity, len(released)
            )
            if session.sticky_id and not self._dispatcher.serves(session.sticky_id):
                await self._store.forget_worker(session.sticky_id)  # its cache is gone
            self._dispatcher.wake()

    @errors.unary
    async def RenewLeases(
        self, request: tpb.RenewLeasesRequest, context: Context
    ) -> tpb.RenewLeasesResponse:
        if len(request.leases) > MAX_CAPACITY:
            raise errors.invalid_argument(f"renew at most {MAX_CAPACITY} leases at once")
        principal = current_principal.get()
        namespace = principal.namespace if principal is not None else None
        leases = [_lease_ref(ref, namespace) for ref in request.leases]
        key = principal.key_id if principal is not None else ""
        renewal = await self._store.renew_own(key, leases, self._dispatcher.lease_ttl)
        response = tpb.RenewLeasesResponse()
        response.now.FromDatetime(renewal.now)
        for (workflow_id, step_id, fence), expires in renewal.expiries.items():
            lease = tpb.LeaseRef(workflow_id=workflow_id, step_id=step_id, fence=fence)
            response.renewed.add(lease=lease).expire_time.FromDatetime(expires)
        return response


class SchedulerServicer(BuildsApi, FlowApi, PausesApi, sgrpc.SchedulerServiceServicer):
    """Scheduling requests from history, task-queue questions, and the operators' view of
    builds (builds_api.py), their limits and budgets (flow_api.py) and their pauses
    (pauses_api.py) from the gateway."""

    def __init__(self, store: TaskStore, dispatcher: Dispatcher) -> None:
        self._store = store
        self._dispatcher = dispatcher

    @errors.unary
    async def CheckLease(
        self, request: spb.CheckLeaseRequest, context: Context
    ) -> spb.CheckLeaseResponse:
        lease = Lease(request.workflow_id, request.step_id, request.fence)
        return spb.CheckLeaseResponse(held=await self._store.holds(lease, request.key_id))

    @errors.unary
    async def FindIdleRuns(
        self, request: spb.FindIdleRunsRequest, context: Context
    ) -> spb.FindIdleRunsResponse:
        if len(request.workflow_ids) > MAX_IDLE_QUERY:
            asked = len(request.workflow_ids)
            raise errors.invalid_argument(
                f"ask about at most {MAX_IDLE_QUERY} runs at a time, not {asked}"
            )
        idle = await self._store.idle_runs(list(request.workflow_ids))
        return spb.FindIdleRunsResponse(workflow_ids=idle)

    @errors.unary
    async def EnqueueTasks(
        self, request: spb.EnqueueTasksRequest, context: Context
    ) -> spb.EnqueueTasksResponse:
        tasks = due_tasks(request)
        closed = sorted({(t.workflow_id, max(t.run_number, 1)) for t in request.tasks if t.closed})
        await self._store.enqueue(tasks, closed)
        self._dispatcher.flow_arrived({t.task_queue for t in tasks if t.flow is not None})
        self._dispatcher.wake()
        return spb.EnqueueTasksResponse()

    @errors.unary
    async def DescribeTaskQueue(
        self, request: spb.DescribeTaskQueueRequest, context: Context
    ) -> spb.DescribeTaskQueueResponse:
        if not request.task_queue:
            raise errors.invalid_argument("task_queue is required")
        types = await self._store.registered_types(request.task_queue)
        return spb.DescribeTaskQueueResponse(
            workflow_types=types, connected_workers=self._dispatcher.sessions_on(request.task_queue)
        )
