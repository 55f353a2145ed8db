"""Worker: holds a stream to the scheduler, runs leased tasks (workflows and remote steps),
heartbeats, drains on stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.telemetry.propagation import context_from
from perdure.telemetry.rpc import aio_channel, sync_channel
from perdure.worker._build import build_id_of
from perdure.worker._cells import Cell
from perdure.worker._context import HandedBack
from perdure.worker._errors import JournalRejectedError, JournalUnavailableError, LeaseLostError
from perdure.worker._leases import LeaseKeeper, task_name
from perdure.worker._loop_watch import running
from perdure.worker._misconfigured import check_resolves, permanent
from perdure.worker._registry import StepFunction, WorkflowFunction, remote_step_name, workflow_name
from perdure.worker._rpc import CHANNEL_OPTIONS
from perdure.worker._runner import run_task
from perdure.worker._session import JournalSession
from perdure.worker._step_task import run_step_task
from perdure.worker._sticky import cache_from
from perdure.worker._telemetry import tracer
from perdure.worker._usage import UsageReport

log = logging.getLogger("perdure.worker")

RECONNECT_MAX_SECONDS = 5.0
# How long a stopping worker waits for the scheduler to end its stream after half-closing it.
CLOSE_SECONDS = 5.0
# Timer tasks may come this early: the run is loaded and replayed before its timer is due, and
# waits out the rest (less than LOCAL_WAIT_SECONDS) in the workflow context.
TIMER_LOOKAHEAD_SECONDS = 0.1


class _StreamClosedError(Exception):
    """The scheduler ended the stream (for example while shutting down)."""


class Worker:
    """Runs workflows and remote steps (`steps`, marked @remote_step) from one task queue, at
    most `concurrency` tasks at a time.

    Use `await worker.run()` in your program. `worker.stop()` drains: no new tasks; running
    workflows stop before their next new step and go back to the queue at once, for another
    worker; steps under way get `shutdown_grace` seconds to finish; the rest are cancelled and
    their leases left to expire (a sync step's thread cannot be stopped).
    `build_id` names the version of the code (default PERDURE_BUILD_ID, else derived from the
    source of the modules defining the workflows and steps): see _build.
    Cancelling `run` stops every task at once; their leases expire.

    Leases are renewed from a thread of their own (see _leases), and a lease that cannot be
    renewed has its work stopped before it can expire: one executor per lease.

    A worker that cannot serve as configured (no key, an invalid, revoked or wrong-role key, an
    address that does not resolve) does not retry: `run` raises WorkerConfigurationError saying
    what to fix. A service that cannot be reached is retried with backoff, each attempt logged
    with its cause. `api_key` defaults to PERDURE_API_KEY.

    Suspended runs stay in memory (sticky execution): at most `cache_size` of them
    (PERDURE_WORKER_CACHE_SIZE, default 500; 0: none) and about `cache_bytes` of their
    journals (PERDURE_WORKER_CACHE_BYTES, default 256 MiB), least recently used out. A run's
    next task, if it comes here and nobody else loaded the run meanwhile, resumes its code
    where it waits instead of replaying it from the start.

    `cells` (instead of `scheduler` and `history`): serve several cells, each a database with
    its own scheduler and history, with one session per cell; `concurrency`, `cache_size` and
    `cache_bytes` are then per cell, and a cell that cannot be reached is retried on its own
    while the others are served.
    """

    def __init__(
        self,
        workflows: Iterable[WorkflowFunction] = (),
        *,
        steps: Iterable[StepFunction] = (),
        task_queue: str = "default",
        concurrency: int = 10,
        scheduler: str = "localhost:7402",
        history: str = "localhost:7401",
        identity: str | None = None,
        shutdown_grace: float = 10.0,
        api_key: str | None = None,
        namespace: str = "",
        cache_size: int | None = None,
        cache_bytes: int | None = None,
        build_id: str | None = None,
        cells: Iterable[Cell] = (),
    ) -> None:
        self._workflows: dict[str, WorkflowFunction] = {}
        for fn in workflows:
            name = workflow_name(fn)
            if name is None:
                raise ValueError(f"{fn!r} is not a workflow: decorate it with @workflow")
            if name in self._workflows:
                raise ValueError(f"two workflows are registered as {name!r}")
            self._workflows[name] = fn
        self._steps: dict[str, StepFunction] = {}
        for fn in steps:
            name = remote_step_name(fn)
            if name is None:
                raise ValueError(f"{fn!r} is not a remote step: decorate it with @remote_step")
            if name in self._steps:
                raise ValueError(f"two remote steps are registered as {name!r}")
            self._steps[name] = fn
        if not self._workflows and not self._steps:
            raise ValueError("a worker needs at least one workflow or remote step")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.task_queue = task_queue
        self.concurrency = concurrency
        self.identity = identity or f"{socket.gethostname()}:{os.getpid()}"
        self._scheduler_address = scheduler
        self._history_address = history
        self._shutdown_grace = shutdown_grace
        # A worker key, sent on every call when set.
        self._api_key = api_key or os.environ.get("PERDURE_API_KEY") or None
        self.namespace = namespace  # empty: the key's (or "default" without keys)
        self._cache = cache_from(cache_size, cache_bytes)  # None: off
        # Routing policies send a type's runs to workers of the right build (_build.py).
        self.build_id = build_id_of(build_id, [*self._workflows.values(), *self._steps.values()])
        self._sticky_id = ""  # this process's cache, for the scheduler: new at every run()
        self._keeper: LeaseKeeper | None = None  # the leases held, while `run` runs
        self._running: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._call: grpc.aio.StreamStreamCall[tpb.ConnectRequest, tpb.ConnectResponse] | None = None
        self._welcomes = 0  # sessions the scheduler welcomed, so far
        self._write_lock = asyncio.Lock()
        # TaskDone messages of tasks finished between two sessions (while moving to another
        # scheduler replica), sent once the next session is welcomed. Their leases stay listed
        # until then: the next hello hands them to the new session, the only one whose
        # TaskDone the scheduler takes.
        self._unsent: list[tpb.TaskDone] = []
        self._closing = False  # the drain is over: the session ends for good
        # One worker per cell when there are several: each its own sessions and leases.
        self._cells = [
            Worker(
                self._workflows.values(),
                steps=self._steps.values(),
                task_queue=task_queue,
                concurrency=concurrency,
                scheduler=cell.scheduler,
                history=cell.history,
                identity=self.identity,
                shutdown_grace=shutdown_grace,
                api_key=self._api_key,
                namespace=namespace,
                cache_size=cache_size,
                cache_bytes=cache_bytes,
                build_id=self.build_id,
            )
            for cell in cells
        ]
        if len(self._cells) == 1:  # one cell: as if named by scheduler and history
            self._scheduler_address = self._cells[0]._scheduler_address
            self._history_address = self._cells[0]._history_address
            self._cells = []

    @property
    def workflow_types(self) -> list[str]:
        """The workflow types this worker serves."""
        return sorted(self._workflows)

    @property
    def step_types(self) -> list[str]:
        """The remote step types this worker executes."""
        return sorted(self._steps)

    def stop(self) -> None:
        """Begin a graceful shutdown; `run()` returns once it is done."""
        self._stopping.set()
        for cell in self._cells:
            cell.stop()

    async def run(self) -> None:
        """Serve until stopped, reconnecting to the scheduler whenever the stream breaks; raise
        WorkerConfigurationError at once if the configuration cannot work."""
        if self._cells:
            await self._run_cells()
            return
        await check_resolves(self._scheduler_address, "scheduler")
        await check_resolves(self._history_address, "history")
        self._sticky_id = uuid.uuid4().hex if self._cache is not None else ""
        # Renewals go on a blocking channel of their own, from the keeper's thread.
        renewals = sync_channel(
            self._scheduler_address, CHANNEL_OPTIONS, api_key=self._api_key, traced=False
        )
        self._keeper = LeaseKeeper(
            tgrpc.TaskServiceStub(renewals), asyncio.get_running_loop(), self.task_queue
        )
        self._keeper.start()
        async with (
            aio_channel(self._scheduler_address, CHANNEL_OPTIONS, api_key=self._api_key) as tasks,
            aio_channel(self._history_address, CHANNEL_OPTIONS, api_key=self._api_key) as history,
        ):
            log.info(
                "worker %s starting: build %s, queue %s, scheduler %s, history %s",
                self.identity,
                self.build_id,
                self.task_queue,
                self._scheduler_address,
                self._history_address,
            )
            journal_session = JournalSession(
                jgrpc.JournalServiceStub(history), build_id=self.build_id
            )
            serving = asyncio.create_task(self._serve(tasks, journal_session))
            stopping = asyncio.create_task(self._stopping.wait())
            try:
                await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if serving.done():  # it gave up: a configuration that cannot work
                    await self._abandon_running()
                else:
                    # On the live stream, which keeps carrying TaskDone.
                    cut_short = await self._drain()
                    await self._close_stream(serving, goodbye=not cut_short)
            finally:
                stopping.cancel()
                serving.cancel()
                await asyncio.wait({serving})
                # Nothing renews leases from here on: nothing may run under them either.
                self._keeper.stop()
                for task in self._running:
                    task.cancel()
                self._drop_cache()
                await journal_session.close()
                renewals.close()
            if not serving.cancelled() and (error := serving.exception()) is not None:
                log.error("worker %s cannot serve: %s", self.identity, error)
                raise error
            log.info("worker %s stopped", self.identity)

    async def _run_cells(self) -> None:
        """Serve every cell until stopped; a configuration that cannot work in one cell stops
        them all (the same key and code serve every cell)."""
        serving = [asyncio.create_task(cell.run()) for cell in self._cells]
        try:
            done, _ = await asyncio.wait(serving, return_when=asyncio.FIRST_EXCEPTION)
            failed = [task for task in done if task.exception() is not None]
            if failed:
                self.stop()
                await asyncio.wait(serving)
                raise failed[0].exception()  # type: ignore[misc]
        finally:
            for task in serving:
                task.cancel()

    async def _abandon_running(self) -> None:
        """Stop every task at once: nothing it writes could be acknowledged any more."""
        for task in self._running:
            task.cancel()
        if self._running:
            await asyncio.wait(self._running)

    async def _serve(self, tasks: grpc.aio.Channel, journal: JournalSession) -> None:
        """Hold a session with the scheduler, reconnecting with backoff, until cancelled or,
        once stopping, until the stream ends. Raise WorkerConfigurationError on an answer that
        no retry can change (UNAUTHENTICATED, PERMISSION_DENIED)."""
        task_stub = tgrpc.TaskServiceStub(tasks)
        delay = 0.1
        attempt = 0
        while not self._closing:
            welcomed = self._welcomes
            try:
                await self._session(task_stub, journal)
                delay = 0.1
                continue  # asked to move: at once
            except (grpc.aio.AioRpcError, _StreamClosedError) as error:
                if self._closing:
                    return
                if isinstance(error, grpc.aio.AioRpcError):
                    refusal = permanent(error, "the scheduler", self._scheduler_address)
                    if refusal is not None:
                        raise refusal from None
                    reason = f"{error.code().name}: {error.details()}"
                else:
                    reason = str(error)
                if self._welcomes > welcomed:
                    # A session was up: back off afresh. Otherwise every stream lost after a
                    # few failed connects would wait the longest delay, and leases held
                    # meanwhile would expire before the worker is back to renew them.
                    delay, attempt = 0.1, 0
                attempt += 1
                log.warning(
                    "scheduler %s: stream lost or refused (%s); reconnect attempt %d in %.1fs",
                    self._scheduler_address,
                    reason,
                    attempt,
                    delay,
                )
            await _backoff(tasks, delay)
            delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    async def _session(self, task_stub: tgrpc.TaskServiceStub, journal: JournalSession) -> None:
        """One session, until the scheduler asks this worker to reconnect (return) or the
        stream ends otherwise (raise)."""
        # Not wait_for_ready: an unreachable scheduler fails the attempt with its cause, which
        # _serve logs before the next one.
        call = task_stub.Connect()
        hello = tpb.Hello(
            identity=self.identity,
            task_queue=self.task_queue,
            workflow_types=self.workflow_types,
            step_types=self.step_types,
            capacity=self.concurrency,
            timer_lookahead=timedelta(seconds=TIMER_LOOKAHEAD_SECONDS),
            leases=self._hello_leases(),
            namespace=self.namespace,
            sticky_id=self._sticky_id,
            build_id=self.build_id,
        )
        await call.write(tpb.ConnectRequest(hello=hello))
        first = await call.read()
        if first is grpc.aio.EOF or first.WhichOneof("message") != "welcome":
            raise _StreamClosedError("the scheduler did not welcome this worker")
        interval = first.welcome.heartbeat_interval.ToTimedelta().total_seconds()
        self.keeper.configure(first.welcome.lease_ttl.ToTimedelta().total_seconds(), interval)
        log.info(
            "worker %s connected: queue %s, workflows %s, remote steps %s",
            self.identity,
            self.task_queue,
            ", ".join(self.workflow_types) or "-",
            ", ".join(self.step_types) or "-",
        )
        self._call = call  # only a welcomed stream carries heartbeats, results and Drain
        self._welcomes += 1
        unsent, self._unsent = self._unsent, []
        for done in unsent:
            await self._task_done(done)
        if self._stopping.is_set():
            await self._send(tpb.ConnectRequest(drain=tpb.Drain()))  # moved while draining
        heartbeats = asyncio.create_task(self._heartbeat(interval))
        try:
            while True:
                message = await call.read()
                if message is grpc.aio.EOF:
                    raise _StreamClosedError("the scheduler closed the stream")
                kind = message.WhichOneof("message")
                if kind == "reconnect":
                    log.info("moving to another scheduler replica: %s", message.reconnect.reason)
                    await self._half_close(call)
                    while await call.read() is not grpc.aio.EOF:
                        pass
                    return
                if kind == "task":
                    await self._start(message.task, journal)
                elif kind == "lease_revoked":
                    revoked = message.lease_revoked
                    self.keeper.revoke(revoked.lease, revoked.reason)
        finally:
            heartbeats.cancel()
            self._call = None
            # An abrupt end: the scheduler keeps this session's leases until they expire or
            # the next hello takes them over.
            call.cancel()

    @property
    def keeper(self) -> LeaseKeeper:
        """The leases held (only while `run` runs)."""
        if self._keeper is None:
            raise RuntimeError("the worker is not running")
        return self._keeper

    async def _start(self, task: tpb.Task, journal: JournalSession) -> None:
        job = asyncio.create_task(self._run_one(task, journal))
        if not self.keeper.hold(task, job):
            # Delivered after its deadline (this worker's loop was stalled, say): the lease
            # may already be another worker's. Handed back, it is granted again at once
            # rather than when it expires; the release is fenced, so a newer holder's lease
            # is untouched.
            job.cancel()
            lease = tpb.LeaseRef(
                workflow_id=task.workflow_id, step_id=task.step_id, fence=task.fence
            )
            log.warning(
                "%s (fence %d): the task arrived after its lease's deadline; handing it back",
                task_name(lease),
                task.fence,
            )
            await self._task_done(tpb.TaskDone(lease=lease, unfinished=True))
            return
        self._running.add(job)
        job.add_done_callback(self._running.discard)

    async def _run_one(self, task: tpb.Task, journal: JournalSession) -> None:
        attributes: dict[str, AttributeValue] = {
            "perdure.workflow.id": task.workflow_id,
            "perdure.task_queue": self.task_queue,
            "perdure.fence": task.fence,
            "perdure.worker.identity": self.identity,
        }
        if task.step_id:
            attributes.update(
                {"perdure.step.id": task.step_id, "perdure.step.type": task.step_type}
            )
        else:
            attributes["perdure.workflow.type"] = task.workflow_type
        lease = tpb.LeaseRef(workflow_id=task.workflow_id, fence=task.fence, step_id=task.step_id)
        # A child of the lease grant, in the workflow's one trace, whichever worker runs it.
        with tracer.start_as_current_span(
            "perdure.task.run", context_from(task.trace_context), attributes=attributes
        ) as span:
            kind = task.step_type or task.workflow_type
            log.info("running %s %s (fence %d)", kind, task_name(lease), task.fence)
            sticky = False
            usage = UsageReport() if task.step_id else None
            try:
                with running(f"the code of {kind} {task_name(lease)} (fence {task.fence})"):
                    if task.step_id:
                        await run_step_task(task, journal, self._steps, usage)
                    else:
                        sticky = await run_task(
                            task, journal, self._workflows, self._stopping, cache=self._cache
                        )
            except asyncio.CancelledError:
                job = asyncio.current_task()
                if job is None or not self.keeper.fenced(job):
                    raise  # a drain's or the caller's
                # The lease is dropped and left to expire: the run is due again then, for any
                # worker, with a higher fence.
                span.set_attribute("perdure.task.outcome", "self_fenced")
                span.set_status(Status(StatusCode.ERROR, "lease not renewed in time"))
                return
            except HandedBack as handed_back:
                span.set_attribute("perdure.task.outcome", "handed_back")
                log.info("%s %s: the worker is stopping", task_name(lease), handed_back)
                await self._task_done(tpb.TaskDone(lease=lease, unfinished=True))
                return
            except LeaseLostError as error:
                _failed(span, error)
                log.warning(
                    "%s: lease with fence %d lost, abandoning: %s",
                    task_name(lease),
                    task.fence,
                    error,
                )
                # Still say we are done with it: the scheduler counts the lease against this
                # session's capacity until then, and its release is fenced, so a newer
                # holder's lease is untouched.
            except (JournalUnavailableError, JournalRejectedError) as error:
                _failed(span, error)
                # Keep the lease from being renewed so that it expires and the workflow is
                # retried, here or elsewhere.
                log.error(
                    "%s: journal call failed (%s); leaving it to lease expiry",
                    task_name(lease),
                    error,
                )
                self._forget(lease)
                return
        done = tpb.TaskDone(lease=lease, sticky=sticky)
        settled = usage.for_task_done() if usage is not None else None
        if settled is not None:  # a step task's: settles its estimate's reservation
            done.usage.CopyFrom(settled)
        await self._task_done(done)

    async def _task_done(self, done: tpb.TaskDone) -> None:
        """Tell the scheduler the worker is done with a lease, and stop listing it. It stops
        listing it first: a renewal answered after the scheduler released the lease must not
        find it still held, and fence a finished task. Between two sessions the lease stays
        listed (and renewed) until the next session is welcomed, then that one is told. A
        TaskDone the stream did not take (it broke, or was half-closed meanwhile) waits for
        the next session too, whose hello lists its lease: that session adopts the lease, then
        the TaskDone releases it. Dropped, it would leave the lease to expire."""
        if self._call is None:
            self._unsent.append(done)
            return
        self._forget(done.lease)
        if not await self._send(tpb.ConnectRequest(task_done=done)):
            self._unsent.append(done)

    def _hello_leases(self) -> list[tpb.LeaseRef]:
        """The leases a hello lists: those held, and those of TaskDones not sent yet."""
        leases = {(r.workflow_id, r.step_id, r.fence): r for r in self.keeper.refs()}
        for done in self._unsent:
            lease = done.lease
            leases.setdefault((lease.workflow_id, lease.step_id, lease.fence), lease)
        return list(leases.values())

    def _forget(self, lease: tpb.LeaseRef) -> None:
        self.keeper.forget(lease)

    async def _heartbeat(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            heartbeat = tpb.Heartbeat(leases=self.keeper.refs())
            await self._send(tpb.ConnectRequest(heartbeat=heartbeat))

    async def _send(self, message: tpb.ConnectRequest) -> bool:
        """Write `message` on the session's stream; say whether it was written. The stream is
        read under the lock that `_half_close` ends it under, so nothing is written after the
        half-close. A broken stream is noticed by the reader, which reconnects.

        A caller cancelled meanwhile (a task whose lease was fenced, say) does not cancel the
        write: grpc.aio cancels the whole call when a write is cancelled, and with it the
        session every task shares (the worker then stopped serving)."""
        async with self._write_lock:
            call = self._call
            if call is None:
                return False
            write = asyncio.ensure_future(call.write(message))
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                await asyncio.wait({write})  # the lock is held until the write is over
                if not write.cancelled():
                    write.exception()  # retrieved: the reader notices a broken stream
                raise
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                return False
            return True

    async def _half_close(self, call: grpc.aio.StreamStreamCall[Any, Any]) -> None:
        """Send nothing more on `call` (what was sent is still handled); later messages wait
        for the next session."""
        if self._call is call:
            self._call = None
        async with self._write_lock:
            with contextlib.suppress(
                grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError
            ):
                await call.done_writing()

    async def _close_stream(self, serving: asyncio.Task[None], goodbye: bool) -> None:
        """End the session after the drain. A goodbye: the scheduler handles what was sent,
        releases what is left and ends the stream (within CLOSE_SECONDS). Otherwise the stream
        just ends, and the leases left expire."""
        self._closing = True
        call = self._call
        if call is None:
            return
        if not goodbye:
            log.warning(
                "tasks outlived the shutdown grace and were cancelled; a sync step's thread may "
                "still run, so their leases are left to expire rather than released"
            )
            return
        await self._half_close(call)
        await asyncio.wait({serving}, timeout=CLOSE_SECONDS)

    async def _drain(self) -> bool:
        """Stop taking tasks; let running ones finish within the grace period (workflows hand
        their task back before their next new step); cancel the rest, and say whether there
        were any."""
        await self._send(tpb.ConnectRequest(drain=tpb.Drain()))
        self._drop_cache()  # the runs kept go to other workers, replayed
        pending: set[asyncio.Task[None]] = set()
        if self._running:
            log.info(
                "draining: waiting up to %.0fs for %d running workflow(s)",
                self._shutdown_grace,
                len(self._running),
            )
            _, pending = await asyncio.wait(self._running, timeout=self._shutdown_grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        return bool(pending)

    def _drop_cache(self) -> None:
        if self._cache is not None:
            self._cache.clear()


async def _backoff(channel: grpc.aio.Channel, delay: float) -> None:
    """Wait `delay` before the next attempt; if the channel could not connect, only until it
    can (a scheduler back from a restart is met at once)."""
    if channel.get_state() == grpc.ChannelConnectivity.READY:
        await asyncio.sleep(delay)  # connected, yet refused or cut: back off in full
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(channel.channel_ready(), delay)


def _failed(span: trace.Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, str(error)))
