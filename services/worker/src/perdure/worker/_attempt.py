"""One attempt of a step, run here (ctx.step) or for another worker's workflow (a remote
step): run it, journal its outcome, and say whether another attempt follows."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.util.types import AttributeValue

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker._errors import (
    JournalRejectedError,
    JournalUnavailableError,
    LeaseLostError,
    StepHeartbeatTimeoutError,
    StepTimeoutError,
    WorkerLostError,
)
from perdure.worker._flow import Usage, check_key
from perdure.worker._frames import DEFAULT_STREAM, Frames
from perdure.worker._loop_watch import running, runs_for_caller
from perdure.worker._payload import failure_from, to_payload
from perdure.worker._retry import NO_RETRY, RetryPolicy
from perdure.worker._telemetry import step_attempt_ended, tracer
from perdure.worker._threads import BodyThreads
from perdure.worker._usage import UsageReport

log = logging.getLogger("perdure.worker")

# A step still running after this long reports itself, so that describe shows it.
ANNOUNCE_AFTER_SECONDS = 1.0
# Names of calls the SDK records itself (ctx.now(), timers, signals...); user steps may not
# use "$".
INTERNAL_PREFIX = "$"

Record = Callable[[Any], Awaitable[Any]]
# The worker process's threads for sync bodies.
_BODY_THREADS = BodyThreads()


@dataclass(frozen=True)
class StepContext:
    """What a running step may hand to the outside world."""

    workflow_id: str
    step_id: str
    idempotency_key: str
    fence: int
    attempt: int
    heartbeat_details: Any = None  # the last heartbeat details of an earlier attempt

    def emit(self, chunk: Any, stream: str = DEFAULT_STREAM) -> None:
        """Publish `chunk` (a JSON value; a str for text) on the run's stream `stream`, in
        order, tagged with this step and attempt: readers get it live (ReadStream). If this
        attempt fails, readers get a reset of the step's frames before the next attempt's.
        Sent in the background: an async step's emit never blocks; a sync step's waits only
        while 50,000 chunks (or 32 MiB) are not yet stored by history, where an async step's
        raises StreamBufferFullError. Raises TypeError for a value that is not JSON,
        ValueError for a bad stream name or a chunk over 2 MiB, RuntimeError outside the
        running attempt."""
        frames = _current_frames.get(None)
        if frames is None or _current_step.get(None) is not self:
            raise RuntimeError(
                f"emit() of step {self.step_id!r} is only available inside its running attempt"
            )
        frames.emit(chunk, stream)

    def report_usage(self, units: int = 0, cost_micros: int = 0, model: str = "") -> None:
        """Report what this attempt used (tokens or other units, and money in millionths, and
        the model that answered for a model call), settling the estimate its remote call
        declared and journaled with the attempt's outcome; a later report replaces this one. An
        attempt that reports nothing counts as having used its whole estimate. A local step's
        report is ignored (only remote steps reserve an estimate). Raises TypeError or
        ValueError for amounts that are not ints in [0, 2**63) or a model name that is not 0
        to 200 printable characters, RuntimeError outside the running attempt."""
        usage = Usage(units=units, cost_micros=cost_micros)
        if model:
            check_key("model", model)
        if _current_step.get(None) is not self:
            raise RuntimeError(
                f"report_usage() of step {self.step_id!r} is only available inside its running "
                "attempt"
            )
        report = _current_usage.get(None)
        if report is not None:
            report.report(usage, model)


_current_step: contextvars.ContextVar[StepContext] = contextvars.ContextVar("perdure_step")
_current_heartbeats: contextvars.ContextVar[Heartbeats] = contextvars.ContextVar(
    "perdure_heartbeats"
)
_current_pulse: contextvars.ContextVar[_Pulse] = contextvars.ContextVar("perdure_pulse")
_current_frames: contextvars.ContextVar[Frames] = contextvars.ContextVar("perdure_frames")
# A remote step's attempt only: where its handler's usage report goes.
_current_usage: contextvars.ContextVar[UsageReport | None] = contextvars.ContextVar(
    "perdure_usage", default=None
)


class _Pulse:
    """When the running attempt last showed life (started, or called heartbeat())."""

    def __init__(self) -> None:
        self.at = time.monotonic()  # a float store: safe from the body's thread


def current_step() -> StepContext:
    """The step being executed: call from inside a step function for its idempotency key."""
    try:
        return _current_step.get()
    except LookupError:
        raise RuntimeError("current_step() is only available inside a running step") from None


def heartbeat(details: Any = None) -> None:
    """From inside a running step (sync or async, local or remote): record progress `details`
    (JSON). The next attempt of the step, after a failure or a crash, finds the last details in
    `current_step().heartbeat_details`. Sent in the background; never blocks."""
    step = current_step()
    _current_pulse.get().at = time.monotonic()
    _current_heartbeats.get().report_threadsafe(step, to_payload(details))


class Heartbeats:
    """Sends the progress of running steps: only the latest, one at a time."""

    def __init__(self, record: Record, step_task: bool = False) -> None:
        self._record = record
        self._step_task = step_task  # the records go under a step task's lease
        self._loop = asyncio.get_running_loop()
        self._latest: tuple[StepContext, Payload | None] | None = None
        self._sender: asyncio.Task[None] | None = None

    def report_threadsafe(self, step: StepContext, details: Payload | None) -> None:
        """Queue progress from any thread (a sync step's, or the event loop's own)."""
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # a worker thread
            on_loop = False
        if on_loop:
            self.report(step, details)
        else:
            # Queued before the thread's result reaches the loop, so before the flush below.
            self._loop.call_soon_threadsafe(self.report, step, details)

    def report(self, step: StepContext, details: Payload | None) -> None:
        """Queue progress (on the event loop)."""
        self._latest = (step, details)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())

    async def flush(self) -> None:
        """Wait until the progress queued so far is sent: an attempt's outcome is recorded
        after it, so the next attempt always finds the last details reported."""
        if self._sender is not None:
            await asyncio.wait([self._sender])  # its failures are its own: progress is best effort

    def announce(self, step: StepContext) -> None:
        """Report a long-running step once, so that describe shows it as the current step
        (unless heartbeat details of it are about to be sent, which report it as well)."""
        if self._latest is None:
            self.report(step, None)

    async def _send(self) -> None:
        while self._latest is not None:
            step, details = self._latest
            self._latest = None
            request = jpb.RecordHeartbeatRequest(
                step_id=step.step_id,
                attempt=step.attempt,
                details=details,
                step_task=self._step_task,
            )
            try:
                await self._record(request)
            except (LeaseLostError, JournalUnavailableError) as error:
                # Progress is best effort; the step's own record decides.
                log.warning("heartbeat of step %s not recorded: %s", step.step_id, error)


@dataclass(frozen=True)
class Attempted:
    """How an attempt ended, as journaled."""

    request: jpb.RecordStepRequest  # the record sent: output, or failure (and retry delay)
    response: jpb.RecordStepResponse | None  # None: an output sent ahead of its answer
    error: Exception | None = None  # None: the step completed
    retry_at: datetime | None = None  # a failed attempt's next one is due then


@dataclass(frozen=True)
class Attempt:
    """One attempt to run: the step, the code, and where its outcome goes."""

    step: StepContext
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    retry: RetryPolicy
    timeout: float | None
    workflow_type: str
    heartbeat_timeout: float | None = None
    # Whether the start must be journaled before the body runs (a step task's LoadStep journaled
    # it already; the SDK's own calls, such as ctx.now(), cannot crash a worker).
    journal_start: bool = True
    # A step task's: the usage its handler reports (None for a local step).
    usage: UsageReport | None = None


def lost_attempt_error(step: StepContext) -> WorkerLostError:
    """The failure of an attempt the journal shows started and never recorded."""
    return WorkerLostError(
        f"attempt {step.attempt} of step {step.step_id!r} never reported: the worker running it "
        "was lost (it crashed or was killed, or its lease expired)"
    )


async def run_attempt(
    attempt: Attempt,
    request: jpb.RecordStepRequest,
    record: Record,
    heartbeats: Heartbeats,
    lost: bool = False,
    record_ahead: Callable[[jpb.RecordStepRequest], bool] | None = None,
) -> Attempted:
    """Run the attempt under its span and journal its outcome with `record` (the output, or
    the failure with a retry delay while `retry` allows another attempt). The start is journaled
    first, so that an attempt whose worker dies still counts. `lost`: the attempt started
    earlier and its worker was lost; it is recorded as failed (WorkerLostError), not run.
    `record_ahead`: sends the output without waiting for its answer where it can (True)."""
    step = attempt.step
    request.attempt = step.attempt
    request.start_time.GetCurrentTime()
    attributes: dict[str, AttributeValue] = {
        "perdure.step.name": attempt.name,
        "perdure.step.id": step.step_id,
        "perdure.step.attempt": step.attempt,
        "perdure.step.idempotency_key": step.idempotency_key,
    }
    # The attempt's span is current while the step runs: the step's own calls nest in it.
    with tracer.start_as_current_span(
        f"perdure.step {attempt.name}",
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        started = time.perf_counter()
        frames: Frames | None = None

        async def failed(error: Exception, retry: RetryPolicy) -> Attempted:
            seconds = time.perf_counter() - started
            request.ClearField("output")
            request.failure.CopyFrom(failure_from(error))
            retrying = retry.retries(error, step.attempt)
            if retrying:
                request.retry_delay.FromTimedelta(timedelta(seconds=retry.delay(step.attempt)))
            if frames is not None:
                try:
                    await frames.flush()
                except JournalRejectedError as refused:  # the failure is recorded all the same
                    log.warning("frames of step %s not stored: %s", step.step_id, refused)
            await heartbeats.flush()
            _journal_usage(request, attempt.usage)
            response = await record(request)
            retry_at = response.retry_time.ToDatetime(tzinfo=UTC) if retrying else None
            step_attempt_ended(span, attempt.workflow_type, attempt.name, seconds, error, retry_at)
            if retry_at is not None:
                log.warning(
                    "step %s attempt %d failed (%s: %s); next attempt at %s",
                    step.step_id,
                    step.attempt,
                    request.failure.type,
                    request.failure.message,
                    retry_at.isoformat(),
                )
            return Attempted(request, response, error, retry_at)

        if lost:
            return await failed(lost_attempt_error(step), attempt.retry)
        if attempt.journal_start and not attempt.name.startswith(INTERNAL_PREFIX):
            await record(_start_request(request))
        frames = Frames(record, step.step_id, step.attempt, request.step_task)
        steps = _current_step.set(step)
        beats = _current_heartbeats.set(heartbeats)
        pulse = _current_pulse.set(_Pulse())
        emits = _current_frames.set(frames)
        usage = _current_usage.set(attempt.usage)
        if attempt.usage is not None:
            attempt.usage.start()
        announce = None
        if not attempt.name.startswith(INTERNAL_PREFIX):
            announce = asyncio.get_running_loop().call_later(
                ANNOUNCE_AFTER_SECONDS, heartbeats.announce, step
            )
        try:
            try:
                with running(f"step {attempt.name} ({step.step_id} of {step.workflow_id})"):
                    result = await _invoke(attempt)
            except Exception as error:
                return await failed(error, attempt.retry)
            try:
                encoded = to_payload(result)
            except TypeError as error:  # retrying would return the same value: fail now
                return await failed(error, NO_RETRY)
        finally:
            _current_step.reset(steps)
            _current_heartbeats.reset(beats)
            _current_pulse.reset(pulse)
            _current_frames.reset(emits)
            _current_usage.reset(usage)
            if attempt.usage is not None:
                attempt.usage.end()
            if announce is not None:
                announce.cancel()
        request.output.CopyFrom(encoded)
        try:
            await frames.flush()  # the step closes with its frames stored
        except JournalRejectedError as error:
            return await failed(error, NO_RETRY)
        await heartbeats.flush()
        _journal_usage(request, attempt.usage)
        response = None
        if record_ahead is None or not record_ahead(request):
            try:
                response = await record(request)
            except JournalRejectedError as error:  # the result breaks the payload limits
                return await failed(error, NO_RETRY)
        step_attempt_ended(span, attempt.workflow_type, attempt.name, time.perf_counter() - started)
        return Attempted(request, response)


def _journal_usage(request: jpb.RecordStepRequest, usage: UsageReport | None) -> None:
    """A step task's outcome carries what its handler reported, journaled with it."""
    journaled = usage.for_journal() if usage is not None else None
    if journaled is not None:
        request.usage.CopyFrom(journaled)


def _start_request(request: jpb.RecordStepRequest) -> jpb.RecordStepRequest:
    """The record that an attempt begins, for the call and attempt of `request`."""
    started = jpb.RecordStepRequest(
        step_id=request.step_id,
        step_name=request.step_name,
        position=request.position,
        attempt=request.attempt,
        attempt_started=True,
    )
    started.start_time.CopyFrom(request.start_time)
    return started


async def _invoke(attempt: Attempt) -> Any:
    """Run the body under its time limits. On a limit, an async body is cancelled; a sync one
    is abandoned (a thread cannot be stopped): it runs on in its thread, holding no slot
    anything else waits for, and its late result is ignored."""
    fn, args, kwargs = attempt.fn, attempt.args, attempt.kwargs
    body: asyncio.Future[Any]
    if inspect.iscoroutinefunction(fn):
        body = task = asyncio.create_task(fn(*args, **kwargs))
        runs_for_caller(task)  # the loop watch names the step if the body blocks the loop
    else:
        body = _in_thread(fn, args, kwargs)
    try:
        result = await _watch(body, attempt.timeout, attempt.heartbeat_timeout)
    finally:
        if not body.done():
            body.cancel()
    if inspect.isawaitable(result):
        return await result
    return result


async def _watch(body: asyncio.Future[Any], limit: float | None, beat_limit: float | None) -> Any:
    """Wait for `body`; raise when it runs past `limit` seconds (start to close) or goes
    `beat_limit` seconds without a heartbeat. A cancellation of the waiter (a lease lost, a
    drain) is never swallowed."""
    pulse = _current_pulse.get()
    started = time.monotonic()
    while True:
        deadlines = []
        if limit is not None:
            deadlines.append(started + limit)
        if beat_limit is not None:
            deadlines.append(pulse.at + beat_limit)
        wait = max(min(deadlines) - time.monotonic(), 0) if deadlines else None
        done, _ = await asyncio.wait([body], timeout=wait)
        if done:
            return body.result()
        now = time.monotonic()
        if limit is not None and now - started >= limit:
            raise StepTimeoutError(f"the attempt ran longer than its {limit}s timeout")
        if beat_limit is not None and now - pulse.at >= beat_limit:
            raise StepHeartbeatTimeoutError(
                f"the attempt went {beat_limit}s without calling heartbeat() (its "
                "heartbeat_timeout)"
            )


def _in_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> asyncio.Future[Any]:
    """Run a sync body on a thread no other body is using (in the caller's context): its time
    limit starts as it starts, and if it is abandoned it takes no thread from later attempts
    (_threads)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # abandoned
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = context.run(fn, *args, **kwargs), None
        except BaseException as raised:  # as a pool thread would: SystemExit reaches the waiter
            result, error = None, raised
        # A closed loop (RuntimeError): nobody waits for this body any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    _BODY_THREADS.run(run, f"perdure-step-{getattr(fn, '__name__', 'body')}")
    return future
