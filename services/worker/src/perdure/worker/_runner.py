"""Advance one workflow under one lease: load, replay, run new steps, close."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._context import ContinuedAsNew, Suspended, WorkflowContext, call_workflow
from perdure.worker._errors import (
    JournalRejectedError,
    NonDeterminismError,
    WorkflowCancelledError,
)
from perdure.worker._journal import JournalClient
from perdure.worker._loop_watch import relabel, running, running_in
from perdure.worker._payload import failure_from, from_payload, to_payload
from perdure.worker._registry import WorkflowFunction, workflow_retry
from perdure.worker._session import JournalSession
from perdure.worker._sticky import CachedRun, Pause, StickyCache, advance, looked_up
from perdure.worker._telemetry import trace_ended_wait, tracer, wait_attributes

log = logging.getLogger("perdure.worker")


async def run_task(
    task: tpb.Task,
    session: JournalSession,
    workflows: dict[str, WorkflowFunction],
    stopping: asyncio.Event,
    monotonic: Callable[[], float] = time.monotonic,
    cache: StickyCache | None = None,
) -> bool:
    """Advance the task's workflow as far as it goes; True when it suspended and `cache` (the
    cache of suspended runs, None: off) keeps it, for its TaskDone to say sticky. Raises
    LeaseLostError if fenced out, and HandedBack if `stopping` is set before the workflow's
    next new call. `monotonic`: the clock that measures the time since the load (the replay
    cases freeze it)."""
    journal = JournalClient(session, task.workflow_id, task.fence, task.lease_proof)
    live = cache.take(task.workflow_id) if cache is not None else None
    try:
        loaded, live = await _load(journal, live, cache is not None)
        if loaded.workflow.status != wf.WORKFLOW_STATUS_RUNNING:
            return False  # closed already: an extra dispatch after a crash; nothing to do
        if live is not None:
            relabel(live.code, running_in(asyncio.current_task()) or live.workflow_id)
            live.pause.resume()
        else:
            fn = workflows.get(loaded.workflow.workflow_type)
            if fn is None:
                await _park_unknown(task, journal, loaded, workflows)
                return False
            live = _started(fn, loaded, journal, stopping, monotonic, cache is not None)
        trace_ended_wait(loaded)
        (outcome, value), keep = await advance(live.code, live.pause)
        await _conclude(task, journal, outcome, value)
        if not keep or cache is None or stopping.is_set():
            return False
        live.fence = task.fence
        live.last_event_id = max((e.event_id for e in loaded.events), default=live.last_event_id)
        kept = cache.keep(live)
        live = None  # the cache's now (closed by it if dropped at once)
        return kept
    finally:
        if live is not None:
            live.close()  # not kept: its code must never go on


async def _load(
    journal: JournalClient, kept: CachedRun | None, caching: bool
) -> tuple[jpb.LoadJournalResponse, CachedRun | None]:
    """Load the run: with its state `kept` from an earlier lease of this worker, only the
    events since, taken into that state (returned with it) when no other lease loaded the run
    meanwhile; otherwise the whole journal, for a replay (the kept state closed)."""
    if kept is None:
        if caching:
            looked_up(journal.workflow_id, "miss")
        return await journal.load(), None
    loaded = await journal.load(after_event_id=kept.last_event_id)
    if loaded.workflow.status != wf.WORKFLOW_STATUS_RUNNING:
        return loaded, kept  # closed: nothing to resume (the caller closes it)
    if loaded.previous_fence != kept.fence:
        why = f"the run was loaded under fence {loaded.previous_fence} since"
    elif not kept.ctx.resume(loaded, journal):
        why = "an event only a replay can take in"
    else:
        looked_up(journal.workflow_id, "hit")
        kept.size += sum(event.ByteSize() for event in loaded.events)
        return loaded, kept
    looked_up(journal.workflow_id, "stale", why)
    kept.close()
    return await journal.load(), None


def _started(
    fn: WorkflowFunction,
    loaded: jpb.LoadJournalResponse,
    journal: JournalClient,
    stopping: asyncio.Event,
    monotonic: Callable[[], float],
    keepable: bool,
) -> CachedRun:
    """The run's code started as a task of its own, which a wait (if `keepable`) suspends
    rather than ends, so that the run can be kept between its tasks."""
    pause = Pause()
    retry = workflow_retry(fn)
    ctx = WorkflowContext(loaded, journal, retry, stopping, monotonic, pause if keepable else None)
    # The code's task runs it under the job's name, for the loop watch to report it.
    described = running_in(asyncio.current_task()) or f"the code of {ctx.workflow_id}"
    code = asyncio.create_task(_code(fn, ctx, from_payload(loaded.workflow.input), described))
    return CachedRun(
        workflow_id=ctx.workflow_id,
        code=code,
        pause=pause,
        ctx=ctx,
        fence=journal.fence,
        last_event_id=0,
        size=sum(event.ByteSize() for event in loaded.events),
    )


async def _park_unknown(
    task: tpb.Task,
    journal: JournalClient,
    loaded: jpb.LoadJournalResponse,
    workflows: dict[str, WorkflowFunction],
) -> None:
    """Park a run of a type this worker does not serve."""
    finish = jpb.FinishWorkflowRequest(workflow_id=task.workflow_id, fence=task.fence)
    finish.park.CopyFrom(
        wf.Failure(
            type="UnknownWorkflowType",
            message=f"workflow type {loaded.workflow.workflow_type!r} is not registered on "
            f"this worker (it serves {', '.join(sorted(workflows))})",
        )
    )
    await journal.call(finish)


async def _conclude(task: tpb.Task, journal: JournalClient, outcome: str, value: Any) -> None:
    """Journal where the code got to: a suspension, or the run's end."""
    finish = jpb.FinishWorkflowRequest(workflow_id=task.workflow_id, fence=task.fence)
    run_span = trace.get_current_span()
    run_span.set_attribute("perdure.task.outcome", outcome)
    if outcome == "suspend":
        wait = wait_attributes(value)
        until = wait.get("perdure.wait.until", "no deadline")
        kind = wait["perdure.wait.kind"]
        log.info(
            "workflow %s waiting for %s %s (until %s)", task.workflow_id, kind, value.name, until
        )
        request = jpb.SuspendWorkflowRequest(workflow_id=task.workflow_id, fence=task.fence)
        request.wait.CopyFrom(value)
        with tracer.start_as_current_span("perdure.suspend", attributes=wait):
            await journal.call(request)
        return
    if outcome == "result":
        finish.result.CopyFrom(value)
        log.info("workflow %s completed", task.workflow_id)
    elif outcome == "continue_as_new":
        finish.continue_as_new.input.CopyFrom(value)
        log.info("workflow %s continued as new", task.workflow_id)
    elif outcome == "cancelled":
        finish.cancelled.CopyFrom(value)
        log.info("workflow %s cancelled", task.workflow_id)
    elif outcome == "failure":
        finish.failure.CopyFrom(value)
        log.info("workflow %s failed: %s: %s", task.workflow_id, value.type, value.message)
    else:
        finish.park.CopyFrom(value)
        run_span.set_status(Status(StatusCode.ERROR, f"{value.type}: {value.message}"))
        run_span.add_event(
            "exception", {"exception.type": value.type, "exception.message": value.message}
        )
        log.error("workflow %s parked: %s", task.workflow_id, value.message)
    try:
        await journal.call(finish)
    except JournalRejectedError as error:
        if outcome != "result":
            raise
        # The result breaks the payload limits: the run fails, saying so.
        log.error("workflow %s failed: its result was refused: %s", task.workflow_id, error)
        finish.failure.CopyFrom(failure_from(error))
        await journal.call(finish)


async def _code(
    fn: WorkflowFunction, ctx: WorkflowContext, arg: Any, described: str
) -> tuple[str, Any]:
    with running(described):
        return await _execute(fn, ctx, arg)


async def _execute(fn: WorkflowFunction, ctx: WorkflowContext, arg: Any) -> tuple[str, Any]:
    """Run the workflow function; return ("result"|"failure"|"park"|"cancelled", Failure or
    Value), ("continue_as_new", the next input) or ("suspend", Wait). Code that no longer
    matches its journal parks, whether it found that on its way to a result or while failing
    or being cancelled."""
    outcome, value = await _outcome(fn, ctx, arg)
    if ctx.non_determinism is not None:  # even if the code caught it, or raised over it
        return "park", failure_from(ctx.non_determinism)
    leftover = ctx.unconsumed_steps()
    if outcome in ("result", "failure", "cancelled", "continue_as_new") and leftover:
        ended = {"result": "returned", "continue_as_new": "continued as new"}.get(
            outcome, f"ended ({getattr(value, 'type', '')})"
        )
        error = NonDeterminismError(
            f"workflow {ctx.workflow_id!r} {ended} without calling recorded step(s) "
            f"{', '.join(leftover)}; the code changed in a way that does not replay"
        )
        return "park", failure_from(error)
    return outcome, value


async def _outcome(fn: WorkflowFunction, ctx: WorkflowContext, arg: Any) -> tuple[str, Any]:
    try:
        result = await call_workflow(fn, ctx, arg)
        return "result", to_payload(result)
    except Suspended as suspended:
        return "suspend", suspended.wait
    except ContinuedAsNew as continued:
        return "continue_as_new", continued.input
    except WorkflowCancelledError as error:
        return "cancelled", failure_from(error)
    except NonDeterminismError as error:
        return "park", failure_from(error)
    except Exception as error:  # the workflow's own failure, journaled as its outcome
        return "failure", failure_from(error)
