"""The WorkflowService requests the clients send, built in one place for Client and
AsyncClient alike, and how a closed run's summary becomes result()'s value or error."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NamedTuple

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client._errors import (
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowOutcomeError,
    WorkflowParkedError,
    WorkflowTerminatedError,
)
from perdure.worker._payload import from_payload, to_payload

# Closed for watchers and results: not RUNNING, not WAITING (docs/guarantees.md).
CLOSED = frozenset(
    {
        wf.WORKFLOW_STATUS_COMPLETED,
        wf.WORKFLOW_STATUS_FAILED,
        wf.WORKFLOW_STATUS_PARKED,
        wf.WORKFLOW_STATUS_CANCELLED,
        wf.WORKFLOW_STATUS_TERMINATED,
        wf.WORKFLOW_STATUS_CONTINUED_AS_NEW,
    }
)
# The longest wait of one GetWorkflowResult call: result() loops over such long polls.
LONG_POLL_SECONDS = 60.0
DEFAULT_STREAM = "output"


class StartKeys(NamedTuple):
    """A start's debounce key and window (seconds) and singleton key ("" / None: none)."""

    debounce_key: str = ""
    debounce_window: float | None = None
    singleton_key: str = ""


def start_request(
    namespace: str,
    workflow_type: str,
    workflow_id: str,
    task_queue: str,
    input: Any,
    execution_timeout: float | None,
    id_reuse_policy: int = 0,
    request_id: str = "",
    flow: fpb.RunFlow | None = None,
    keys: StartKeys | None = None,
) -> api.StartWorkflowRequest:
    """Without a workflow id or request id, new ones are fixed here, before the first send, so
    that a retried send starts nothing new. `flow`: the run's keys, priority, fairness key and
    budget (perdure.worker._flow.run_flow)."""
    request = api.StartWorkflowRequest(
        namespace=namespace,
        workflow_type=workflow_type,
        workflow_id=workflow_id or str(uuid.uuid4()),
        task_queue=task_queue,
        input=to_payload(input),
        id_reuse_policy=id_reuse_policy,  # type: ignore[arg-type]
        request_id=request_id or str(uuid.uuid4()),
    )
    if execution_timeout is not None:
        request.execution_timeout.FromTimedelta(timedelta(seconds=execution_timeout))
    if flow is not None:
        request.flow.CopyFrom(flow)
    if keys is not None:
        request.debounce_key, request.singleton_key = keys.debounce_key, keys.singleton_key
        if keys.debounce_window is not None:
            request.debounce_window.FromTimedelta(timedelta(seconds=keys.debounce_window))
    return request


def signal_request(
    namespace: str, workflow_id: str, name: str, value: Any, signal_id: str | None
) -> api.SignalWorkflowRequest:
    return api.SignalWorkflowRequest(
        namespace=namespace,
        workflow_id=workflow_id,
        signal_name=name,
        payload=to_payload(value),
        signal_id=signal_id or "",
    )


def fork_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    return {step: to_payload(value) for step, value in (overrides or {}).items()}


def result_request(
    namespace: str, workflow_id: str, run_id: str, wait: float
) -> api.GetWorkflowResultRequest:
    request = api.GetWorkflowResultRequest(
        namespace=namespace, workflow_id=workflow_id, run_id=run_id
    )
    request.wait.FromTimedelta(timedelta(seconds=max(0.0, wait)))
    return request


def read_stream_request(
    namespace: str, workflow_id: str, run_id: str, stream: str, after_seq: int
) -> api.ReadStreamRequest:
    return api.ReadStreamRequest(
        namespace=namespace,
        workflow_id=workflow_id,
        run_id=run_id,
        stream=stream,
        after_seq=after_seq,
        follow=True,
    )


def watch_request(
    namespace: str, workflow_id: str, run_id: str, after_event_id: int
) -> api.WatchWorkflowRequest:
    return api.WatchWorkflowRequest(
        namespace=namespace, workflow_id=workflow_id, run_id=run_id, after_event_id=after_event_id
    )


def new_events(message: api.WatchWorkflowResponse, after_event_id: int) -> int:
    """Keep in `message` only the events after `after_event_id` (a resumed watch never repeats
    one); return the last event id it then holds, or `after_event_id`."""
    events = [event for event in message.events if event.event_id > after_event_id]
    del message.events[:]
    message.events.extend(events)
    return events[-1].event_id if events else after_event_id


def outcome(info: wf.WorkflowInfo) -> Any:
    """The value a closed run returned, decoded exactly as the workflow returned it (ints stay
    ints); or the error saying how it ended otherwise."""
    status = info.status
    where = f"workflow {info.workflow_id!r} (run {info.run_id})"
    if status == wf.WORKFLOW_STATUS_COMPLETED:
        return from_payload(info.result)
    failure = f"{info.failure.type}: {info.failure.message}"
    if status == wf.WORKFLOW_STATUS_FAILED:
        raise WorkflowFailedError(f"{where} failed: {failure}", info)
    if status == wf.WORKFLOW_STATUS_PARKED:
        raise WorkflowParkedError(f"{where} is parked: {failure}", info)
    if status == wf.WORKFLOW_STATUS_CANCELLED:
        raise WorkflowCancelledError(f"{where} was cancelled", info)
    if status == wf.WORKFLOW_STATUS_TERMINATED:
        raise WorkflowTerminatedError(f"{where} was terminated", info)
    name = wf.WorkflowStatus.Name(status).removeprefix("WORKFLOW_STATUS_")
    raise WorkflowOutcomeError(f"{where} ended {name} without a result", info)


def next_run(info: wf.WorkflowInfo) -> str:
    """The run a result follows to: the next one of a run that continued as new, else ""."""
    if info.status == wf.WORKFLOW_STATUS_CONTINUED_AS_NEW:
        return info.next_run_id
    return ""
