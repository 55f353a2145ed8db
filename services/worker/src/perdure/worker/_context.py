"""WorkflowContext: the durable calls workflow code makes. Each is matched to the journal by
_replay, recorded through _journal if new, and run (a step's attempt) by _attempt."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from opentelemetry.util.types import AttributeValue

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.telemetry.propagation import links_to
from perdure.telemetry.timers import record_fire
from perdure.worker._approvals import (
    APPROVAL_PREFIX,
    ApprovalDecision,
    OnEscalated,
    check_approval,
    decision_of,
    escalation_of,
    expired_error,
)
from perdure.worker._attempt import (
    INTERNAL_PREFIX,
    Attempt,
    Heartbeats,
    StepContext,
    heartbeat,
    run_attempt,
)
from perdure.worker._children import ChildWorkflowHandle, child_failed, child_id, close_policy
from perdure.worker._errors import (
    LeaseLostError,
    NonDeterminismError,
    SignalTimeoutError,
    WorkflowCancelledError,
    step_failed,
)
from perdure.worker._flow import Usage, step_flow
from perdure.worker._info import RunInfo
from perdure.worker._journal import JournalClient
from perdure.worker._model_call import MODEL_STEP, model_estimate, model_request
from perdure.worker._model_usage import ModelPrices
from perdure.worker._patches import Patches, check_patch_id, deprecated_message
from perdure.worker._payload import from_payload, surely_accepted, to_payload
from perdure.worker._replay import STEP_OUTCOMES, Call, Replay, payload_size
from perdure.worker._retry import NO_RETRY, RetryPolicy
from perdure.worker._sticky import Pause
from perdure.worker._telemetry import TIMER_LATENESS, tracer

if TYPE_CHECKING:
    from perdure.worker._agent_loop import AgentLoopResult, Turn, TurnResult
    from perdure.worker._saga import Saga

log = logging.getLogger("perdure.worker")

# A timer due within this long is waited out in the worker rather than suspended. It is more
# than the lookahead with which the worker accepts timer tasks (see Worker), so that a task
# granted ahead of its timer never suspends again.
LOCAL_WAIT_SECONDS = 0.25


class Suspended(BaseException):
    """The workflow cannot go on until `wait` is over: the runner suspends it."""

    def __init__(self, wait: wf.Wait) -> None:
        super().__init__(f"waiting: {wf.WaitKind.Name(wait.kind)} {wait.name}")
        self.wait = wait


class ContinuedAsNew(BaseException):
    """The code called ctx.continue_as_new: the runner closes the run and starts the next one
    of its workflow id with `input` (a BaseException, so that the code's own `except
    Exception` cannot swallow it)."""

    def __init__(self, input_value: Payload) -> None:
        super().__init__("continued as new")
        self.input = input_value


class CancelAtStart(BaseException):
    """A step's start was kept out of the journal for the run's cancel request: the
    cancellation is delivered at that call instead of running the body."""


def request_kept_out(request: Any, response: Any) -> bool:
    """Whether history kept a start `unless_cancel_requested` out of the journal."""
    return bool(
        getattr(request, "unless_cancel_requested", False)
        and response.cancel_requested
        and not response.event_id
    )


class HandedBack(BaseException):
    """The worker is stopping: the workflow stops before its next new call, with nothing half
    done, and its task goes back to the queue for another worker to continue from the journal."""


def _wait(kind: wf.WaitKind, name: str, until: datetime | None) -> Suspended:
    wait = wf.Wait(kind=kind, name=name)
    if until is not None:
        wait.until.FromDatetime(until)
    return Suspended(wait)


class WorkflowContext:
    """Handed to every workflow function; its methods are the workflow's durable calls.

    Code outside steps must be deterministic: it runs again on every replay.
    """

    def __init__(
        self,
        loaded: jpb.LoadJournalResponse,
        journal: JournalClient,
        retry: RetryPolicy,
        stopping: asyncio.Event | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        pause: Pause | None = None,
    ) -> None:
        self.workflow_id = loaded.workflow.workflow_id
        self.workflow_type = loaded.workflow.workflow_type
        self._retry = retry
        self._monotonic = monotonic
        self._lease(loaded, journal)
        self._task_queue = loaded.workflow.task_queue
        self._replay = Replay(loaded)
        self._patches = Patches(loaded.events)
        self._run_id = loaded.workflow.run_id
        self._run_number = loaded.workflow.run_number or 1
        self._cancel_requested = loaded.workflow.cancel_requested
        self._cancel_reason = self._replay.cancel_reason
        self._cancel_delivered = self._replay.cancel_delivered
        self._heartbeats = Heartbeats(self._record)
        self._stopping = stopping  # set when the worker drains
        # With the cache of suspended runs on: where the code waits between tasks (_sticky).
        self._pause = pause
        self._closed = False  # dropped from the cache: no call may go on
        self._holding_cancel = 0  # > 0 while a saga compensates: a cancel request waits (_saga)

    def _lease(self, loaded: jpb.LoadJournalResponse, journal: JournalClient) -> None:
        """Take up the lease that loaded the run."""
        self.fence = journal.fence
        self._journal = journal
        # What the database clock said at load: a timer or retry later than this is not due.
        self._now = loaded.now.ToDatetime(tzinfo=UTC)
        # The clock to wait on: read as late in the load as history could (an older history's
        # answer has only `now`), counted from no earlier than the answer's arrival.
        self._clock = loaded.clock.ToDatetime(tzinfo=UTC) if loaded.HasField("clock") else self._now
        self._loaded_at = self._monotonic()

    def resume(self, loaded: jpb.LoadJournalResponse, journal: JournalClient) -> bool:
        """Take in a later lease's load of the events since this context's (sticky
        execution): signals, cancel requests, remote steps' outcomes, progress, the clock;
        from now on the calls go under the new lease. False, and nothing changed, when an
        event is one only a replay can take in."""
        if not self._replay.take_in(loaded, self.fence):
            return False
        self._patches.take_in(loaded.events)
        journal.carry_on(self._journal)  # ctx.info goes on from where the code had reached
        self._lease(loaded, journal)
        if loaded.workflow.cancel_requested or self._replay.cancel_reason:
            self._cancel_requested = True
        self._cancel_reason = self._cancel_reason or self._replay.cancel_reason
        return True

    def close(self) -> None:
        """The run was dropped from the cache: every call from now on raises, and nothing is
        journaled."""
        self._closed = True

    @property
    def info(self) -> RunInfo:
        """The run: its ids, its place in its chain, and its journal's size so far."""
        return RunInfo(
            workflow_id=self.workflow_id,
            workflow_type=self.workflow_type,
            run_id=self._run_id,
            run_number=self._run_number,
            history_length=self._journal.reached,
            history_bytes=self._journal.reached_bytes,
        )

    async def continue_as_new(self, input: Any = None) -> NoReturn:
        """End this run and start the next run of the same workflow id with `input`, in one
        transaction: the journal starts afresh, and signals this run received and did not
        consume go to the next run. Never returns. Call it when ctx.info.history_length or
        history_bytes grows past a limit of your loop's choosing."""
        raise ContinuedAsNew(to_payload(input))

    @property
    def non_determinism(self) -> NonDeterminismError | None:
        """The first mismatch of the code with its journal, if any: the run parks with it."""
        return self._replay.non_determinism

    def patched(self, patch_id: str) -> bool:
        """Whether this run takes the new code path of patch `patch_id`: True for a run that
        reaches this point on code that has the patch (a new run, or an old one that had not
        got this far), recorded in the journal so that every replay answers the same; False
        for a run that went past this point on the old code. The answer is fixed for the run.

            if ctx.patched("fetch-with-retry"):
                page = await ctx.step("fetch_v2", fetch_v2, url)
            else:
                page = await ctx.step("fetch", fetch, url)
        """
        check_patch_id(patch_id)
        self._check_open()
        if self._replay.non_determinism is not None:
            raise self._replay.non_determinism
        return self._patches.patched(patch_id, self._replay.position, self._replay.at_frontier())

    def deprecate_patch(self, patch_id: str) -> None:
        """Declare that every open run took the new path of patch `patch_id`, once the old path
        is removed from the code: a run that reaches this point records the marker as
        `patched` does, and one that went past it on the old code parks
        (NonDeterminismError naming the patch) instead of running new code over an old
        journal. Once no open run is older than the patch, the call can go too."""
        if not self.patched(patch_id):
            raise self._replay.mismatch(deprecated_message(self.workflow_id, patch_id))

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a durable per-attempt limit
        heartbeat_timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` and journal its JSON result.

        On replay a completed step returns its recorded result without running. A sync `fn`
        runs in a thread of its own so heartbeats go on; an async one is awaited. Each attempt
        is journaled as it starts, so an attempt whose worker dies counts (WorkerLostError). A
        failed attempt is retried on the durable schedule of `retry` (default: the workflow's
        policy); `timeout` bounds each attempt (start to close), and `heartbeat_timeout` the
        time between its heartbeat() calls. On a time limit an async body is cancelled and a
        sync one abandoned (its thread runs on; its result is ignored). When attempts run out,
        or the error is not retryable, StepFailedError is raised here (and again on every
        replay).
        """
        _check_name(name)
        _check_limit("timeout", timeout)
        _check_limit("heartbeat_timeout", heartbeat_timeout)
        limits = (timeout, heartbeat_timeout)
        return await self._durable(name, fn, args, kwargs, retry or self._retry, *limits)

    async def now(self) -> datetime:
        """The current UTC time by the database's clock (the one timers and leases use, never
        this worker's), recorded once so that replay sees the same instant."""
        moment = await self._durable(
            "$now", lambda: self._database_now().isoformat(), (), {}, NO_RETRY, None
        )
        return datetime.fromisoformat(moment)

    async def uuid4(self) -> str:
        """A random UUID, recorded once so that replay sees the same value."""
        return str(await self._durable("$uuid", lambda: str(uuid.uuid4()), (), {}, NO_RETRY, None))

    async def sleep(self, seconds: float) -> None:
        """Suspend the workflow for `seconds` (a durable timer on the database clock): no
        worker holds it meanwhile, and it resumes on any worker, even after restarts."""
        if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"sleep needs a finite number of seconds >= 0, not {seconds!r}")
        call, fire = await self._timer("$sleep", delay=seconds)
        await self._sleep(call, fire)

    async def sleep_until(self, moment: datetime) -> None:
        """Suspend the workflow until `moment` (timezone-aware), as `sleep` does."""
        if moment.tzinfo is None:
            raise ValueError("sleep_until needs a timezone-aware datetime")
        call, fire = await self._timer("$sleep", until=moment)
        await self._sleep(call, fire)

    async def wait_for_signal(
        self,
        name: str,
        timeout: float | None = None,  # noqa: ASYNC109 - a durable timer, not asyncio's
    ) -> Any:
        """Consume the oldest signal `name` not consumed yet and return its payload, or suspend
        until one arrives. A signal sent before the wait is waiting here already. With
        `timeout` (seconds), raise SignalTimeoutError if none arrived in time."""
        _check_name(name, "signal name")
        deadline = None
        if timeout is not None:
            if not timeout >= 0:
                raise ValueError("timeout must be a number of seconds >= 0")
            _, deadline = await self._timer(f"$timeout:{name}", delay=timeout)
        call = await self._begin(f"$signal:{name}")
        if call.recorded is not None:
            if call.recorded.event_type == wf.EVENT_TYPE_SIGNAL_TIMED_OUT:
                raise SignalTimeoutError(f"no signal {name!r} within {timeout}s")
            return await self._value(call.recorded)
        while True:
            taken = self._replay.take_signals(name, limit=1)
            if taken:
                payload = await self._journal.payload_of(taken[0])
                await self._consume(call, name, taken, payload)
                return from_payload(payload)
            if deadline is not None and deadline <= self._now:
                request = jpb.ConsumeSignalsRequest(signal_name=name, timed_out=True, **call.ref())
                await self._record(request)
                raise SignalTimeoutError(f"no signal {name!r} within {timeout}s")
            await self._suspend(_wait(wf.WAIT_KIND_SIGNAL, name, deadline))
            await self._arrive(call)  # as a replay would reach it: a cancellation, a drain

    async def drain_signals(self, name: str) -> list[Any]:
        """Take every pending signal `name` without waiting (possibly none), oldest first."""
        _check_name(name, "signal name")
        call = await self._begin(f"$drain:{name}")
        if call.recorded is not None:
            return list(await self._value(call.recorded))
        taken = self._replay.take_signals(name, limit=None)
        payloads = [await self._value(event) for event in taken]
        await self._consume(call, name, taken, to_payload(payloads))
        return payloads

    async def approval(
        self,
        name: str,
        details: Any = None,
        *,
        timeout: float,  # noqa: ASYNC109 - the approval's durable expiry, not asyncio's
        escalate_after: float | None = None,
        approvers: Sequence[str] | None = None,
        escalate_to: Sequence[str] | None = None,
        on_escalated: OnEscalated | None = None,
    ) -> ApprovalDecision:
        """Ask a person to approve `details` (JSON) and wait for the decision: an approval
        record that ApprovalService (`perdure approvals`, the web UI's inbox) lists and decides
        once. `approvers` (role names, API key ids or names; default: any operator) may
        decide; after `escalate_after` seconds undecided it escalates: `escalate_to` may
        decide too, and `on_escalated` (async) is awaited with an ApprovalEscalation, once, at
        that point of the code (its durable calls are journaled there). Returns an
        ApprovalDecision (approved or rejected, by whom, when, why); raises
        ApprovalExpiredError when `timeout` seconds pass with no decision (on the database
        clock, never early). The run holds no worker while it waits."""
        _check_name(name, "approval name")
        check_approval(timeout, escalate_after, approvers, escalate_to)
        call = await self._begin(f"{APPROVAL_PREFIX}{name}")
        if call.recorded is not None:
            self._replay.expect(call, (wf.EVENT_TYPE_APPROVAL_REQUESTED,), "approval")
        else:
            request = jpb.RequestApprovalRequest(
                name=name,
                details=to_payload(details),
                approvers=list(approvers or ()),
                escalate_to=list(escalate_to or ()),
                **call.ref(),
            )
            request.timeout.FromTimedelta(timedelta(seconds=timeout))
            if escalate_after is not None:
                request.escalate_after.FromTimedelta(timedelta(seconds=escalate_after))
            await self._record(request)
        told = False
        while True:
            outcome = self._replay.approval_outcome
            escalated = outcome(call.step_id, wf.EVENT_TYPE_APPROVAL_ESCALATED)
            if escalated is not None and not told:
                told = True  # before the callback: the code is told once, at this point
                if on_escalated is not None:
                    await on_escalated(escalation_of(await self._value(escalated), name))
            decided = outcome(call.step_id, wf.EVENT_TYPE_APPROVAL_DECIDED)
            if decided is not None:
                return decision_of(await self._value(decided))
            expired = outcome(call.step_id, wf.EVENT_TYPE_APPROVAL_EXPIRED)
            if expired is not None:
                raise expired_error(await self._value(expired), name)
            await self._interruptible(call, waiting=True)
            await self._suspend(_wait(wf.WAIT_KIND_APPROVAL, call.step_id, None))

    async def set_state(self, key: str, value: Any) -> None:
        """Publish `value` under `key`: DescribeWorkflow and QueryWorkflow show the latest one,
        even while no worker runs."""
        if not isinstance(key, str) or not key or len(key) > 200:
            raise ValueError("key must be a string of 1 to 200 characters")
        call = await self._begin(f"$state:{key}")
        if call.recorded is None:
            request = jpb.SetStateRequest(key=key, value=to_payload(value), **call.ref())
            await self._record(request)

    def heartbeat(self, details: Any = None) -> None:
        """From inside a running step (sync or async): record progress `details` (JSON). The
        next attempt of the step, after a failure or a crash, finds the last details in
        `current_step().heartbeat_details`. Sent in the background; never blocks."""
        heartbeat(details)

    def call(
        self,
        step_type: str,
        input: Any = None,
        *,
        task_queue: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        heartbeat_timeout: float | None = None,
        keys: Sequence[str] | None = None,
        estimate: Usage | None = None,
    ) -> RemoteCall:
        """A remote step: `step_type` executed by a worker (in any language) that serves it on
        `task_queue` (default: this workflow's). Await it for its JSON result, or pass several
        to `gather`. The call is journaled; the workflow holds no worker while the step runs,
        and replay returns the recorded outcome. Failed attempts are retried on the durable
        schedule of `retry` (default: the workflow's policy); `timeout` bounds each attempt,
        `heartbeat_timeout` the time between its heartbeats. An attempt whose worker dies counts
        as failed (WorkerLostError). When attempts run out, StepFailedError is raised where the
        call is awaited.

        Flow control (worker-protocol.md §27): `keys` (at most 8, e.g. "provider:openai") put
        the step under the concurrency, rate and budget limits set on them; `estimate` is the
        most one attempt may use, reserved against every budget that applies before the attempt
        is granted and settled by what the attempt reports (current_step().report_usage). A
        step whose estimate does not fit a budget of a run that fails then raises
        BudgetExceededError (a StepFailedError). Bad keys or estimates raise ValueError or
        TypeError here, before anything is journaled."""
        _check_name(step_type, "step type")
        _check_limit("timeout", timeout)
        _check_limit("heartbeat_timeout", heartbeat_timeout)
        flow = step_flow(keys, estimate)
        queue = task_queue or self._task_queue
        retry = retry or self._retry
        payload = to_payload(input)
        return RemoteCall(self, step_type, payload, queue, retry, timeout, heartbeat_timeout, flow)

    def model_call(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        keys: Sequence[str] | None = None,
        prices: ModelPrices | None = None,
        estimate: Usage | None = None,
        task_queue: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        step_type: str = MODEL_STEP,
        **params: Any,
    ) -> RemoteCall:
        """A model call as a remote step (worker-protocol.md §32): the chat request (`model`,
        `messages`, `max_tokens`, and any other parameter of an OpenAI-compatible API in
        `params`) is journaled and sent by a worker serving `step_type` (model_step(client)),
        whose report of the model, tokens and cost is journaled with the step and settles its
        budgets. Await it for the response (OpenAI's JSON; model_text() gives its text) or pass
        it to `gather`. It declares `keys` (default ["model:<model>"]: limits an operator sets
        on the model apply) and reserves `estimate` (default: the prompt's UTF-8 bytes plus
        per-message overhead plus max_tokens, an upper bound for text, and their cost at
        `prices`). TypeError or ValueError here for a request a provider would refuse."""
        request = model_request(model, messages, max_tokens, params)
        if estimate is None:
            estimate = model_estimate(request, prices)
        return self.call(
            step_type,
            request,
            task_queue=task_queue,
            retry=retry,
            timeout=timeout,
            keys=[f"model:{model}"] if keys is None else keys,
            estimate=estimate,
        )

    async def start_child(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        id: str | None = None,
        task_queue: str | None = None,
        parent_close_policy: str = "terminate",
    ) -> ChildWorkflowHandle:
        """Start a child workflow of `workflow_type` with `input` on `task_queue` (default: this
        workflow's), in this workflow's namespace; returns its handle at once (`workflow_id`,
        `run_id`, `await handle.result()`), so several children may run side by side
        (`ctx.gather(h1, h2)`). The start is journaled with the child's run in one transaction:
        the child starts exactly once, however often this code runs again.

        `id`: the child's workflow id; default "<this workflow's id>-child-<position>" (the
        call's position in this code, "-run-<n>" appended in the n-th run of a chain), the same
        on every replay. An id an open run holds starts nothing: `result()` raises
        ChildWorkflowFailedError ("WorkflowAlreadyStarted"); one whose run closed gets a new
        run. `parent_close_policy`: what this run's close does to the child if it is still
        open: "terminate" (default), "request_cancel" or "abandon". Cancelling this run asks
        its children (but abandoned ones) to cancel too."""
        _check_name(workflow_type, "workflow type")
        policy = close_policy(parent_close_policy)
        queue = task_queue or self._task_queue
        if not isinstance(queue, str):
            raise ValueError(f"task_queue must be a string, not {queue!r}")
        workflow_id = child_id(self.workflow_id, self._run_number, self._replay.position, id)
        payload = to_payload(input)
        call = await self._begin(workflow_type)
        recorded = call.recorded
        if recorded is not None:
            self._replay.expect(call, (wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED,), "child workflow")
            return ChildWorkflowHandle(
                self, call, recorded.child_workflow_id, recorded.child_run_id
            )
        request = jpb.StartChildRequest(
            child_workflow_id=workflow_id,
            task_queue=queue,
            input=payload,
            parent_close_policy=policy,
            **call.ref(),
        )
        started: jpb.StartChildResponse = await self._record(request)
        if not started.child_run_id:
            # An open run holds the id: history journaled the call's failure with it, which a
            # replay finds; this run learns it from the answer.
            self._replay.child_outcomes[call.step_id] = wf.HistoryEvent(
                event_type=wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED,
                step_id=call.step_id,
                failure=started.failure,
                child_workflow_id=workflow_id,
            )
        return ChildWorkflowHandle(self, call, workflow_id, started.child_run_id)

    async def child(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        id: str | None = None,
        task_queue: str | None = None,
        parent_close_policy: str = "terminate",
    ) -> Any:
        """Run a child workflow to its end (start_child, then its result): its JSON result, or
        ChildWorkflowFailedError if it failed, was cancelled or terminated, or could not
        start. This workflow holds no worker while it waits."""
        handle = await self.start_child(
            workflow_type,
            input,
            id=id,
            task_queue=task_queue,
            parent_close_policy=parent_close_policy,
        )
        return await handle.result()

    async def gather(self, *calls: RemoteCall | ChildWorkflowHandle) -> list[Any]:
        """Run remote steps (and wait for child workflows) side by side; their results, in
        call order. Each remote step is journaled in the order given, so replay is
        deterministic. Once all have their outcomes, the first failed one (in call order)
        raises StepFailedError (ChildWorkflowFailedError for a child)."""
        awaited = [await self._awaited(call) for call in calls]
        if not awaited:
            return []
        while True:
            pending = [one for one in awaited if one.outcome() is None]
            await self._interruptible(awaited[0].call, waiting=bool(pending))
            if not pending:
                break
            await self._suspend(_wait(pending[0].kind, pending[0].call.step_id, None))
        results = []
        for one in awaited:
            outcome = one.outcome()
            assert outcome is not None
            if outcome.event_type == wf.EVENT_TYPE_STEP_FAILED:
                raise step_failed(one.call.step_id, outcome.failure)
            if outcome.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED:
                raise child_failed(one.call.step_id, outcome)
            results.append(await self._value(outcome))
        return results

    def saga(self) -> Saga:
        """Compensations for a block: `async with ctx.saga() as saga:`, then
        `saga.add_compensation(name, fn, *args)` after each step that needs undoing. If the block
        raises (or the run is cancelled in it), they run as durable steps, last first, and the
        error goes on (worker-protocol.md §30; Saga)."""
        from perdure.worker._saga import Saga  # imported here: _saga builds on this module

        return Saga(self)

    async def agent_loop(
        self,
        take_turn: Callable[[Turn], Awaitable[TurnResult]],
        *,
        objective: Any,
        max_turns: int,
        is_met: Callable[[Any], bool] | None = None,
        budget: int | None = None,
        steering_signal: str = "steer",
        abandon_signal: str = "abandon",
        state_key: str = "objective",
        resume: dict[str, Any] | None = None,
    ) -> AgentLoopResult:
        """A standing objective: call `await take_turn(turn)` (a Turn: number, objective, last
        state, guidance, units spent; it returns TurnResult(state, units)) until a reason to
        stop, checked before each turn: `abandon_signal` (default "abandon") received
        ("abandoned"), `is_met(state)` after a turn ("met"), the units reported reach `budget`
        ("out_of_budget"), `max_turns` taken ("max_turns"). Signals `steering_signal` (default
        "steer") received meanwhile change the objective ({"objective": ...} or any plain
        value) or add guidance ({"guidance": ...}) for the next turn. Progress is published
        with set_state under `state_key` (default "objective"). Returns an AgentLoopResult.
        `resume=` takes Turn.carry() from an earlier run, to go on after continue_as_new
        (worker-protocol.md §31)."""
        from perdure.worker._agent_loop import run_agent_loop  # as in saga()

        return await run_agent_loop(
            self,
            take_turn,
            objective=objective,
            max_turns=max_turns,
            is_met=is_met,
            budget=budget,
            steering_signal=steering_signal,
            abandon_signal=abandon_signal,
            state_key=state_key,
            resume=resume,
        )

    async def _awaited(self, call: RemoteCall | ChildWorkflowHandle) -> _Awaited:
        """What gather waits for: a remote step's call, journaled now (or replayed), or a child
        started already."""
        if isinstance(call, ChildWorkflowHandle):
            return _Awaited(call.call, wf.WAIT_KIND_CHILD, self._replay.child_outcomes)
        if not isinstance(call, RemoteCall):
            raise TypeError(f"gather takes ctx.call(...) calls and child handles, not {call!r}")
        scheduled = await self._schedule(call)
        return _Awaited(scheduled, wf.WAIT_KIND_STEP, self._replay.remote_outcomes)

    def unconsumed_steps(self) -> list[str]:
        """Recorded calls the code has not reached: non-deterministic if the run is ending."""
        return self._replay.unreached()

    # -- internals ---------------------------------------------------------------------------

    async def _value(self, event: wf.HistoryEvent) -> Any:
        """The decoded payload of a recorded event, fetched now if the journal holds it by
        reference (a large one): only the values the code reaches are ever in memory."""
        return from_payload(await self._journal.payload_of(event))

    async def _begin(self, name: str, step: bool = False) -> Call:
        """Take the next position for a call (`step`: a step's); check it against the
        journal; deliver a pending cancellation here if the code has not seen it yet."""
        self._check_open()
        self._journal.next_call()
        for marker in self._patches.reached():
            self._journal.reach(marker.event_id)
        call = self._replay.next_call(name)
        if call.recorded is not None:
            recorded = call.recorded
            if step and recorded.event_type in STEP_OUTCOMES:  # from the next call on
                self._journal.reach_outcome(recorded.event_id, payload_size(recorded))
            else:
                self._journal.reach(recorded.event_id, payload_size(recorded))
            if call.recorded.event_type == wf.EVENT_TYPE_CANCELLATION_DELIVERED:
                raise self._cancellation()
            return call
        await self._arrive(call, step)
        return call

    async def _arrive(self, call: Call, step: bool = False) -> None:
        """The code reaches `call` (`step`: a step's), which the journal does not hold: hand
        the run back if the worker is stopping; deliver a pending cancellation here, one an
        answer reported included (a step's start goes beside the outputs sent ahead instead:
        _record)."""
        if not step:
            await self._journal.settle()
        if self._stopping is not None and self._stopping.is_set():
            await self._journal.settle()  # no lease goes back with an outcome on its way
            raise HandedBack(f"handed back before {call.step_id!r}")
        if self._cancel_pending:
            await self._deliver_cancellation(call)

    async def _deliver_cancellation(self, call: Call) -> NoReturn:
        """Journal the cancellation's delivery at `call` (not executed), and raise it."""
        await self._record(jpb.RecordCancellationRequest(**call.ref()))
        self._cancel_delivered = True
        raise self._cancellation()

    async def _suspend(self, waiting: Suspended) -> None:
        """The code cannot go on until the wait is over. With the cache of suspended runs on,
        it stays here until the run's next task resumes it, and the caller checks again what
        it waits for; otherwise it unwinds, and the next task replays the run from the
        start."""
        if self._pause is None:
            raise waiting
        await self._pause.park(waiting)
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise LeaseLostError(
                f"workflow {self.workflow_id!r}: this worker dropped the run's cached state; "
                "its code may not go on here (another task replays it)"
            )

    @property
    def _cancel_pending(self) -> bool:
        """A cancel request the code is yet to have, and may have at its next call."""
        held = self._holding_cancel > 0
        return self._cancel_requested and not self._cancel_delivered and not held

    @contextlib.contextmanager
    def hold_cancellation(self) -> Iterator[None]:
        """While inside, a cancel request is not delivered (compensations run to their end);
        it is delivered at the first call after, as usual."""
        self._holding_cancel += 1
        try:
            yield
        finally:
            self._holding_cancel -= 1

    def _cancellation(self) -> WorkflowCancelledError:
        reason = f": {self._cancel_reason}" if self._cancel_reason else ""
        return WorkflowCancelledError(f"workflow {self.workflow_id!r} was cancelled{reason}")

    async def _record(self, request: Any) -> Any:
        """Send a record of this lease, after the patch markers the code has yet to record;
        note a cancel request an answer reports. An attempt's start sent beside an output is
        not journaled if the run has a cancel request the code has not had: CancelAtStart."""
        self._check_open()
        for marker in self._patches.unsent():
            await self._send(marker)
        beside = isinstance(request, jpb.RecordStepRequest) and request.attempt_started
        if (
            beside
            and self._journal.sending_ahead
            and not self._cancel_delivered
            and not self._holding_cancel
        ):
            request.unless_cancel_requested = True
        response = await self._send(request)
        if request_kept_out(request, response):
            raise CancelAtStart()
        return response

    async def _send(self, request: Any) -> Any:
        response = await self._journal.record(request)
        self._note(response)
        return response

    def _note(self, response: Any) -> None:
        """Note a cancel request an answer reports."""
        if getattr(response, "cancel_requested", False):
            self._cancel_requested = True

    def _record_ahead(self, request: jpb.RecordStepRequest) -> bool:
        """Send a step's output without waiting for its answer (JournalClient.send_ahead), when
        history is sure to take it as it is; False: record it as any other."""
        if self._closed or self._patches.any_unsent or not surely_accepted(request.output):
            return False
        self._journal.send_ahead(request, self._note)
        return True

    async def _timer(
        self, name: str, *, delay: float | None = None, until: datetime | None = None
    ) -> tuple[Call, datetime]:
        call = await self._begin(name)
        if call.recorded is not None:
            return call, call.recorded.due_time.ToDatetime(tzinfo=UTC)
        request = jpb.StartTimerRequest(**call.ref())
        if until is not None:
            request.fire_time.FromDatetime(until)
        else:
            request.delay.FromTimedelta(timedelta(seconds=delay or 0))
        started: jpb.StartTimerResponse = await self._record(request)
        return call, started.fire_time.ToDatetime(tzinfo=UTC)

    async def _sleep(self, call: Call, fire: datetime) -> None:
        """Wait for the timer of `call`. A cancellation requested before it fires ends the wait:
        it is delivered at the call right after the timer, "<timer step id>:cancelled", and
        replay raises it there again, whatever the time by then."""
        while True:
            await self._interruptible(call, waiting=fire > self._now)
            if fire <= self._now:
                return
            if (fire - self._database_now()).total_seconds() <= LOCAL_WAIT_SECONDS:
                break
            await self._suspend(_wait(wf.WAIT_KIND_TIMER, call.step_id, fire))
        # Due soon (a short sleep, or a task granted ahead of its timer): wait here, with the
        # lease, and go on at the due time, judged by a clock never ahead of the database's.
        # An asyncio timer may fire a little early: look at the clock again after it.
        while (remaining := (fire - self._database_now()).total_seconds()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(remaining)
        attributes: dict[str, AttributeValue] = {
            "perdure.workflow.id": self.workflow_id,
            "perdure.step.id": call.step_id,
        }
        late_by = (self._database_now() - fire).total_seconds()
        record_fire(tracer, TIMER_LATENESS, "timer", fire, late_by, attributes)

    async def _interruptible(self, call: Call, waiting: bool) -> None:
        """A cancellation requested while the code waits at `call` (a timer, remote steps)
        ends the wait: it is delivered at the call right after it, "<step id>:cancelled", and
        replay raises it there again, whatever happened to the wait since."""
        interrupt = f"{call.step_id}:cancelled"
        following = self._replay.following()
        delivered_here = (
            following is not None
            and following.event_type == wf.EVENT_TYPE_CANCELLATION_DELIVERED
            and following.step_id == interrupt
        )
        pending = waiting and self._cancel_pending
        if delivered_here or pending:
            await self._begin(interrupt)  # records or replays the delivery, and raises it

    async def _schedule(self, remote: RemoteCall) -> Call:
        """Journal a remote step's call at the next position (once: replay finds it)."""
        call = await self._begin(remote.step_type)
        if call.recorded is not None:
            self._replay.expect(call, (wf.EVENT_TYPE_STEP_SCHEDULED,), "remote step")
            return call
        request = jpb.ScheduleStepRequest(
            task_queue=remote.task_queue,
            input=remote.input,
            retry=remote.retry.to_message(),
            **call.ref(),
        )
        if remote.timeout is not None:
            request.timeout.FromTimedelta(timedelta(seconds=remote.timeout))
        if remote.heartbeat_timeout is not None:
            request.heartbeat_timeout.FromTimedelta(timedelta(seconds=remote.heartbeat_timeout))
        if remote.flow is not None:
            request.flow.CopyFrom(remote.flow)
        await self._record(request)
        return call

    def _database_now(self) -> datetime:
        """The database clock now, never ahead of it: its time at the end of the load, plus the
        time since the answer came."""
        return self._clock + timedelta(seconds=self._monotonic() - self._loaded_at)

    async def _consume(
        self, call: Call, name: str, taken: list[wf.HistoryEvent], result: Payload
    ) -> None:
        request = jpb.ConsumeSignalsRequest(
            signal_name=name, event_ids=[e.event_id for e in taken], result=result, **call.ref()
        )
        # Linked to the spans that received the signals, which link to this workflow's trace.
        with tracer.start_as_current_span(
            "perdure.signal.consume",
            links=links_to(*(event.trace_context for event in taken)),
            attributes={"perdure.signal.name": name, "perdure.signal.count": len(taken)},
        ):
            await self._record(request)

    async def _durable(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retry: RetryPolicy,
        attempt_timeout: float | None,
        heartbeat_timeout: float | None = None,
    ) -> Any:
        call = await self._begin(name, step=True)
        recorded = call.recorded
        if recorded is not None:
            self._replay.expect(call, STEP_OUTCOMES, "step")
            if not name.startswith(INTERNAL_PREFIX):
                log.info("Skipping completed step: %s", call.step_id)
            if recorded.event_type == wf.EVENT_TYPE_STEP_FAILED:
                raise step_failed(call.step_id, recorded.failure)
            return await self._value(recorded)

        while True:
            attempts = self._replay.attempts(call.step_id)
            # An attempt started and never recorded was lost with its worker: it fails now.
            failures, lost = attempts.failures, attempts.lost
            retry_at = failures[-1].due_time.ToDatetime(tzinfo=UTC) if failures else None
            if not lost and retry_at is not None and retry_at > self._now:
                # Woken early (a signal, a cancel request): wait on.
                waiting = _wait(wf.WAIT_KIND_RETRY, call.step_id, retry_at)
            else:
                progress = self._replay.progress.get(call.step_id)
                step = StepContext(
                    workflow_id=self.workflow_id,
                    step_id=call.step_id,
                    idempotency_key=f"{self.workflow_id}:{call.step_id}",
                    fence=self.fence,
                    attempt=attempts.started if lost else len(failures) + 1,
                    heartbeat_details=from_payload(progress.details) if progress else None,
                )
                attempt = Attempt(
                    step,
                    name,
                    fn,
                    args,
                    kwargs,
                    retry,
                    attempt_timeout,
                    self.workflow_type,
                    heartbeat_timeout=heartbeat_timeout,
                )
                request = jpb.RecordStepRequest(**call.ref())
                try:
                    attempted = await run_attempt(
                        attempt, request, self._record, self._heartbeats, lost, self._record_ahead
                    )
                except CancelAtStart:
                    await self._deliver_cancellation(call)
                if attempted.error is None:
                    # The decoded JSON, exactly what a replay will return (tuples become lists).
                    return from_payload(attempted.request.output)
                if attempted.retry_at is None:
                    failure = attempted.request.failure
                    raise step_failed(call.step_id, failure) from attempted.error
                waiting = _wait(wf.WAIT_KIND_RETRY, call.step_id, attempted.retry_at)
                waiting.__cause__ = attempted.error
            await self._suspend(waiting)
            await self._arrive(call)  # as a replay would reach it: a cancellation, a drain


@dataclass(frozen=True)
class _Awaited:
    """A call gather waits on: its outcome, when the journal has it, is in `outcomes`."""

    call: Call
    kind: wf.WaitKind
    outcomes: dict[str, wf.HistoryEvent]

    def outcome(self) -> wf.HistoryEvent | None:
        return self.outcomes.get(self.call.step_id)


@dataclass(frozen=True)
class RemoteCall:
    """A remote step not yet journaled: await it, or pass it to `ctx.gather`."""

    ctx: WorkflowContext
    step_type: str
    input: Payload
    task_queue: str
    retry: RetryPolicy
    timeout: float | None
    heartbeat_timeout: float | None = None
    flow: fpb.StepFlow | None = None  # keys and estimate, if the call declares any

    def __await__(self) -> Generator[Any, None, Any]:
        results = yield from self.ctx.gather(self).__await__()
        return results[0]


def _check_limit(what: str, seconds: float | None) -> None:
    if seconds is not None and not seconds > 0:
        raise ValueError(f"{what} must be a positive number of seconds")


def _check_name(name: Any, what: str = "step name") -> None:
    if not isinstance(name, str) or not name or name.startswith(INTERNAL_PREFIX):
        raise ValueError(f"{what} must be a non-empty string not starting with '$': {name!r}")


async def call_workflow(fn: Callable[..., Awaitable[Any]], ctx: WorkflowContext, arg: Any) -> Any:
    """Call a workflow function as `fn(ctx, input)`, or `fn(ctx)` if it takes no input."""
    if len(inspect.signature(fn).parameters) == 1:
        return await fn(ctx)
    return await fn(ctx, arg)
