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
from perdure.worker._payload import failure_from, from_payload, to_payload
from perdure.worker._registry import WorkflowFunction, workflow_retry
from perdure.worker._session import JournalSession
from perdure.worker._telemetry import trace_ended_wait, tracer, wait_attributes

log = logging.getLogger("perdure.worker")


async def run_task(
    task: tpb.Task,
    session: JournalSession,
    workflows: dict[str, WorkflowFunction],
    stopping: asyncio.Event,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Advance the task's workflow as far as it goes. Raises LeaseLostError if fenced out, and
    HandedBack if `stopping` is set before the workflow's next new call. `monotonic`: the
    clock that measures the time since the load (the replay cases freeze it)."""
    journal = JournalClient(session, task.workflow_id, task.fence)
    loaded = await journal.load()
    if loaded.workflow.status != wf.WORKFLOW_STATUS_RUNNING:
        return  # closed already: an extra dispatch after a crash; nothing to do
    finish = jpb.FinishWorkflowRequest(workflow_id=task.workflow_id, fence=task.fence)
    fn = workflows.get(loaded.workflow.workflow_type)
    if fn is None:
        finish.park.CopyFrom(
            wf.Failure(
                type="UnknownWorkflowType",
                message=f"workflow type {loaded.workflow.workflow_type!r} is not registered on "
                f"this worker (it serves {', '.join(sorted(workflows))})",
            )
        )
        await journal.call(finish)
        return
    trace_ended_wait(loaded)
    ctx = WorkflowContext(loaded, journal, workflow_retry(fn), stopping, monotonic)
    outcome, value = await _execute(fn, ctx, from_payload(loaded.workflow.input))
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
