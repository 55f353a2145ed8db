"""Request validation for history's handlers: what each field must be, answered as
INVALID_ARGUMENT with a message naming the field, and the records the journal takes."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import auth, errors, namespaces
from perdure.common.convert import datetime_of, seconds_of
from perdure.common.flow import check_step_flow
from perdure.common.payload import validate_payload
from perdure.common.text import require_storable
from perdure.history.convert import failure_to_dict
from perdure.history.model import (
    Call,
    ChildStart,
    EventType,
    Lease,
    ParentClosePolicy,
    StartKeys,
    StepRecord,
    Wait,
    WaitKind,
)

MAX_KEY_LENGTH = 200
MAX_TASK_QUEUE_LENGTH = 200
_TIMED_WAITS = (wf.WAIT_KIND_TIMER, wf.WAIT_KIND_RETRY)  # their `until` wakes them


def acting_key() -> str:
    """The API key the call was made with, as the gateway vouches for it or the worker's
    credentials show ("" without keys): the key that marks and holds a lease."""
    principal = auth.current_principal.get()
    return principal.key_id if principal is not None else ""


def require_workflow_id(workflow_id: str) -> None:
    if not workflow_id:
        raise errors.invalid_argument("workflow_id is required")
    require_storable("workflow_id", workflow_id)
    auth.require_namespace(namespaces.namespace_of(workflow_id))


class _Addressed(Protocol):
    workflow_id: str
    namespace: str


def run_key(request: _Addressed) -> str:
    """The platform's id of the run a public request names in its namespace."""
    if not request.workflow_id:
        raise errors.invalid_argument("workflow_id is required")
    require_storable("workflow_id", request.workflow_id)
    namespaces.require_public("workflow_id", request.workflow_id)
    return namespaces.qualify(auth.acting_namespace(request.namespace), request.workflow_id)


def _require_fence(fence: int) -> None:
    if fence <= 0:
        raise errors.invalid_argument("fence must be the positive token of a lease")


class _RunLeaseRequest(Protocol):
    workflow_id: str
    fence: int


def run_lease(request: _RunLeaseRequest) -> Lease:
    """The run's lease a worker's request names, validated, held by the caller's key."""
    require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    return Lease(request.workflow_id, request.fence, acting_key())


class _StepLeaseRequest(Protocol):
    workflow_id: str
    fence: int
    step_id: str


def require_step_lease(request: _StepLeaseRequest) -> None:
    """A request naming a step under a lease: the workflow's (a heartbeat) or its own."""
    require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    if not request.step_id:
        raise errors.invalid_argument("step_id is required")
    require_storable("step_id", request.step_id)


def step_lease(request: _StepLeaseRequest) -> Lease:
    """A remote step's own lease a step task's request names, validated."""
    require_step_lease(request)
    return Lease(request.workflow_id, request.fence, acting_key(), request.step_id)


class _CallRequest(Protocol):
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int


def call_of(request: _CallRequest) -> Call:
    """The lease and code call a worker's record belongs to, validated."""
    require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    if not request.step_id or not request.step_name:
        raise errors.invalid_argument("step_id and step_name are required")
    require_storable("step_id", request.step_id)
    require_storable("step_name", request.step_name)
    if request.position < 0:
        raise errors.invalid_argument("position must be zero or more")
    lease = Lease(request.workflow_id, request.fence, acting_key())
    return Call(lease, request.step_id, request.step_name, request.position)


def patch_of(request: jpb.RecordPatchRequest) -> tuple[Lease, str, int]:
    """The lease, the patch id and the code's position of a patch marker, validated."""
    require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    if not request.patch_id or len(request.patch_id) > MAX_KEY_LENGTH:
        raise errors.invalid_argument(f"patch_id must have 1 to {MAX_KEY_LENGTH} characters")
    require_storable("patch_id", request.patch_id)
    if request.position < 0:
        raise errors.invalid_argument("position must be zero or more")
    return (
        Lease(request.workflow_id, request.fence, acting_key()),
        request.patch_id,
        request.position,
    )


def execution_timeout(start: api.StartWorkflowRequest) -> float | None:
    """A start's execution timeout in seconds (the gateway checked its range); None: unset."""
    if not start.HasField("execution_timeout"):
        return None
    return seconds_of("execution_timeout", start.execution_timeout)


def start_keys(start: api.StartWorkflowRequest) -> StartKeys:
    """A start's debounce and singleton keys (the gateway checked them)."""
    window = start.debounce_window if start.HasField("debounce_window") else None
    return StartKeys(
        debounce_key=start.debounce_key or None,
        debounce_window=None if window is None else seconds_of("debounce_window", window),
        singleton_key=start.singleton_key or None,
    )


def started_at(request: jpb.RecordStepRequest) -> datetime | None:
    return datetime_of("start_time", request.start_time) if request.HasField("start_time") else None


def time_limit(request: jpb.ScheduleStepRequest, field: str) -> float | None:
    """A per-attempt time limit of a remote step's call, in seconds; None when unset."""
    if not request.HasField(field):
        return None
    seconds = seconds_of(field, getattr(request, field))
    if seconds <= 0:
        raise errors.invalid_argument(f"{field} must be positive (unset: no limit)")
    return seconds


def step_flow(request: jpb.ScheduleStepRequest) -> bytes | None:
    """A remote step's flow settings, checked, as the outbox keeps them (None: none)."""
    if not request.HasField("flow"):
        return None
    check_step_flow("flow", request.flow)
    return request.flow.SerializeToString(deterministic=True)


def step_outcome(request: jpb.RecordStepRequest) -> StepRecord:
    """A step record's event type, its payload or failure, its attempt and start, and its
    retry delay (a failed attempt, which leaves the call's position to its final outcome),
    validated."""
    outcome = request.WhichOneof("outcome")
    if outcome is None:
        raise errors.invalid_argument("one of output or failure is required")
    payload = validate_payload("output", request.output) if outcome == "output" else None
    failure = failure_to_dict(request.failure) if outcome == "failure" else None
    if not request.HasField("retry_delay"):
        event_type = EventType.STEP_COMPLETED if outcome == "output" else EventType.STEP_FAILED
        delay = None
    else:
        delay = seconds_of("retry_delay", request.retry_delay)
        if outcome != "failure" or delay < 0:
            raise errors.invalid_argument(
                "retry_delay goes with a failure and must not be negative"
            )
        event_type = EventType.STEP_ATTEMPT_FAILED
    return StepRecord(
        event_type,
        positioned=delay is None,
        attempt=max(request.attempt, 1),
        payload=payload,
        failure=failure,
        due_in=delay,
        started_at=started_at(request),
    )


def wait_of(request: jpb.SuspendWorkflowRequest) -> Wait:
    """What a suspending run waits for, validated."""
    wait = request.wait
    if wait.kind == wf.WAIT_KIND_UNSPECIFIED or not wait.name:
        raise errors.invalid_argument("wait.kind and wait.name are required")
    if wait.kind not in wf.WaitKind.values():
        raise errors.invalid_argument(f"wait.kind {wait.kind} is not a known WaitKind")
    require_storable("wait.name", wait.name)
    if wait.kind in _TIMED_WAITS and not wait.HasField("until"):
        raise errors.invalid_argument("timers and retries need wait.until")
    until = datetime_of("wait.until", wait.until) if wait.HasField("until") else None
    kind = WaitKind(wf.WaitKind.Name(wait.kind).removeprefix("WAIT_KIND_"))
    return Wait(kind, wait.name, until)


MAX_CHILD_ID_LENGTH = 255  # a workflow id's limit (the gateway's validate.workflow_id)


def child_start(request: jpb.StartChildRequest) -> ChildStart:
    """What a StartChild call asks for, validated; its names qualified in the parent's
    namespace, which the child shares."""
    child_id = request.child_workflow_id
    if not 0 < len(child_id) <= MAX_CHILD_ID_LENGTH:
        raise errors.invalid_argument(
            f"child_workflow_id must have 1 to {MAX_CHILD_ID_LENGTH} characters"
        )
    if not child_id.isprintable() or child_id != child_id.strip():
        raise errors.invalid_argument(
            "child_workflow_id must be printable and must not start or end with whitespace"
        )
    require_storable("child_workflow_id", child_id)
    namespaces.require_public("child_workflow_id", child_id)
    require_task_queue(request.task_queue)
    if request.parent_close_policy not in wf.ParentClosePolicy.values():
        raise errors.invalid_argument(
            f"parent_close_policy {request.parent_close_policy} is not a known ParentClosePolicy"
        )
    policy = ParentClosePolicy.TERMINATE
    if request.parent_close_policy != wf.PARENT_CLOSE_POLICY_UNSPECIFIED:
        name = wf.ParentClosePolicy.Name(request.parent_close_policy)
        policy = ParentClosePolicy(name.removeprefix("PARENT_CLOSE_POLICY_"))
    namespace = namespaces.namespace_of(request.workflow_id)
    return ChildStart(
        workflow_id=namespaces.qualify(namespace, child_id),
        workflow_type=request.step_name,
        task_queue=namespaces.qualify(namespace, request.task_queue),
        input_value=validate_payload("input", request.input),
        close_policy=policy,
    )


def require_task_queue(task_queue: str) -> None:
    if not 0 < len(task_queue) <= MAX_TASK_QUEUE_LENGTH:
        raise errors.invalid_argument(
            f"task_queue must have 1 to {MAX_TASK_QUEUE_LENGTH} characters"
        )
    require_storable("task_queue", task_queue)
    namespaces.require_public("task_queue", task_queue)


def require_state_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise errors.invalid_argument(f"key must have 1 to {MAX_KEY_LENGTH} characters")
    require_storable("key", key)
