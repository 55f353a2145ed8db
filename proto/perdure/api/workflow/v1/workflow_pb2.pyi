import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from perdure.api.common.v1 import payload_pb2 as _payload_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkflowStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKFLOW_STATUS_UNSPECIFIED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_RUNNING: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_COMPLETED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_FAILED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_PARKED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_WAITING: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_CANCELLED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_TERMINATED: _ClassVar[WorkflowStatus]
    WORKFLOW_STATUS_CONTINUED_AS_NEW: _ClassVar[WorkflowStatus]

class WaitKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAIT_KIND_UNSPECIFIED: _ClassVar[WaitKind]
    WAIT_KIND_TIMER: _ClassVar[WaitKind]
    WAIT_KIND_SIGNAL: _ClassVar[WaitKind]
    WAIT_KIND_RETRY: _ClassVar[WaitKind]
    WAIT_KIND_STEP: _ClassVar[WaitKind]
    WAIT_KIND_CHILD: _ClassVar[WaitKind]
    WAIT_KIND_APPROVAL: _ClassVar[WaitKind]

class StepStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_STATUS_UNSPECIFIED: _ClassVar[StepStatus]
    STEP_STATUS_RUNNING: _ClassVar[StepStatus]
    STEP_STATUS_RETRYING: _ClassVar[StepStatus]
    STEP_STATUS_COMPLETED: _ClassVar[StepStatus]
    STEP_STATUS_FAILED: _ClassVar[StepStatus]

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_STARTED: _ClassVar[EventType]
    EVENT_TYPE_STEP_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_STEP_FAILED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_FAILED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_PARKED: _ClassVar[EventType]
    EVENT_TYPE_STEP_ATTEMPT_FAILED: _ClassVar[EventType]
    EVENT_TYPE_TIMER_STARTED: _ClassVar[EventType]
    EVENT_TYPE_SIGNAL_RECEIVED: _ClassVar[EventType]
    EVENT_TYPE_SIGNAL_CONSUMED: _ClassVar[EventType]
    EVENT_TYPE_SIGNAL_TIMED_OUT: _ClassVar[EventType]
    EVENT_TYPE_STATE_UPDATED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_SUSPENDED: _ClassVar[EventType]
    EVENT_TYPE_CANCEL_REQUESTED: _ClassVar[EventType]
    EVENT_TYPE_CANCELLATION_DELIVERED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_CANCELLED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_TERMINATED: _ClassVar[EventType]
    EVENT_TYPE_STEP_SCHEDULED: _ClassVar[EventType]
    EVENT_TYPE_STEP_ATTEMPT_STARTED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW: _ClassVar[EventType]
    EVENT_TYPE_PATCH_RECORDED: _ClassVar[EventType]
    EVENT_TYPE_WORKFLOW_RESUMED: _ClassVar[EventType]
    EVENT_TYPE_CHILD_WORKFLOW_STARTED: _ClassVar[EventType]
    EVENT_TYPE_CHILD_WORKFLOW_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_CHILD_WORKFLOW_FAILED: _ClassVar[EventType]
    EVENT_TYPE_APPROVAL_REQUESTED: _ClassVar[EventType]
    EVENT_TYPE_APPROVAL_DECIDED: _ClassVar[EventType]
    EVENT_TYPE_APPROVAL_ESCALATED: _ClassVar[EventType]
    EVENT_TYPE_APPROVAL_EXPIRED: _ClassVar[EventType]

class FrameKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FRAME_KIND_UNSPECIFIED: _ClassVar[FrameKind]
    FRAME_KIND_DATA: _ClassVar[FrameKind]
    FRAME_KIND_RESET: _ClassVar[FrameKind]

class PauseScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAUSE_SCOPE_UNSPECIFIED: _ClassVar[PauseScope]
    PAUSE_SCOPE_WORKFLOW: _ClassVar[PauseScope]
    PAUSE_SCOPE_WORKFLOW_TYPE: _ClassVar[PauseScope]
    PAUSE_SCOPE_TASK_QUEUE: _ClassVar[PauseScope]

class ParentClosePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PARENT_CLOSE_POLICY_UNSPECIFIED: _ClassVar[ParentClosePolicy]
    PARENT_CLOSE_POLICY_TERMINATE: _ClassVar[ParentClosePolicy]
    PARENT_CLOSE_POLICY_REQUEST_CANCEL: _ClassVar[ParentClosePolicy]
    PARENT_CLOSE_POLICY_ABANDON: _ClassVar[ParentClosePolicy]

class ApprovalStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_STATUS_UNSPECIFIED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_PENDING: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_APPROVED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_REJECTED: _ClassVar[ApprovalStatus]
    APPROVAL_STATUS_EXPIRED: _ClassVar[ApprovalStatus]
WORKFLOW_STATUS_UNSPECIFIED: WorkflowStatus
WORKFLOW_STATUS_RUNNING: WorkflowStatus
WORKFLOW_STATUS_COMPLETED: WorkflowStatus
WORKFLOW_STATUS_FAILED: WorkflowStatus
WORKFLOW_STATUS_PARKED: WorkflowStatus
WORKFLOW_STATUS_WAITING: WorkflowStatus
WORKFLOW_STATUS_CANCELLED: WorkflowStatus
WORKFLOW_STATUS_TERMINATED: WorkflowStatus
WORKFLOW_STATUS_CONTINUED_AS_NEW: WorkflowStatus
WAIT_KIND_UNSPECIFIED: WaitKind
WAIT_KIND_TIMER: WaitKind
WAIT_KIND_SIGNAL: WaitKind
WAIT_KIND_RETRY: WaitKind
WAIT_KIND_STEP: WaitKind
WAIT_KIND_CHILD: WaitKind
WAIT_KIND_APPROVAL: WaitKind
STEP_STATUS_UNSPECIFIED: StepStatus
STEP_STATUS_RUNNING: StepStatus
STEP_STATUS_RETRYING: StepStatus
STEP_STATUS_COMPLETED: StepStatus
STEP_STATUS_FAILED: StepStatus
EVENT_TYPE_UNSPECIFIED: EventType
EVENT_TYPE_WORKFLOW_STARTED: EventType
EVENT_TYPE_STEP_COMPLETED: EventType
EVENT_TYPE_STEP_FAILED: EventType
EVENT_TYPE_WORKFLOW_COMPLETED: EventType
EVENT_TYPE_WORKFLOW_FAILED: EventType
EVENT_TYPE_WORKFLOW_PARKED: EventType
EVENT_TYPE_STEP_ATTEMPT_FAILED: EventType
EVENT_TYPE_TIMER_STARTED: EventType
EVENT_TYPE_SIGNAL_RECEIVED: EventType
EVENT_TYPE_SIGNAL_CONSUMED: EventType
EVENT_TYPE_SIGNAL_TIMED_OUT: EventType
EVENT_TYPE_STATE_UPDATED: EventType
EVENT_TYPE_WORKFLOW_SUSPENDED: EventType
EVENT_TYPE_CANCEL_REQUESTED: EventType
EVENT_TYPE_CANCELLATION_DELIVERED: EventType
EVENT_TYPE_WORKFLOW_CANCELLED: EventType
EVENT_TYPE_WORKFLOW_TERMINATED: EventType
EVENT_TYPE_STEP_SCHEDULED: EventType
EVENT_TYPE_STEP_ATTEMPT_STARTED: EventType
EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW: EventType
EVENT_TYPE_PATCH_RECORDED: EventType
EVENT_TYPE_WORKFLOW_RESUMED: EventType
EVENT_TYPE_CHILD_WORKFLOW_STARTED: EventType
EVENT_TYPE_CHILD_WORKFLOW_COMPLETED: EventType
EVENT_TYPE_CHILD_WORKFLOW_FAILED: EventType
EVENT_TYPE_APPROVAL_REQUESTED: EventType
EVENT_TYPE_APPROVAL_DECIDED: EventType
EVENT_TYPE_APPROVAL_ESCALATED: EventType
EVENT_TYPE_APPROVAL_EXPIRED: EventType
FRAME_KIND_UNSPECIFIED: FrameKind
FRAME_KIND_DATA: FrameKind
FRAME_KIND_RESET: FrameKind
PAUSE_SCOPE_UNSPECIFIED: PauseScope
PAUSE_SCOPE_WORKFLOW: PauseScope
PAUSE_SCOPE_WORKFLOW_TYPE: PauseScope
PAUSE_SCOPE_TASK_QUEUE: PauseScope
PARENT_CLOSE_POLICY_UNSPECIFIED: ParentClosePolicy
PARENT_CLOSE_POLICY_TERMINATE: ParentClosePolicy
PARENT_CLOSE_POLICY_REQUEST_CANCEL: ParentClosePolicy
PARENT_CLOSE_POLICY_ABANDON: ParentClosePolicy
APPROVAL_STATUS_UNSPECIFIED: ApprovalStatus
APPROVAL_STATUS_PENDING: ApprovalStatus
APPROVAL_STATUS_APPROVED: ApprovalStatus
APPROVAL_STATUS_REJECTED: ApprovalStatus
APPROVAL_STATUS_EXPIRED: ApprovalStatus

class Wait(_message.Message):
    __slots__ = ("kind", "name", "until")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    kind: WaitKind
    name: str
    until: _timestamp_pb2.Timestamp
    def __init__(self, kind: _Optional[_Union[WaitKind, str]] = ..., name: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("type", "message", "stack_trace")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STACK_TRACE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    stack_trace: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., stack_trace: _Optional[str] = ...) -> None: ...

class WorkflowInfo(_message.Message):
    __slots__ = ("workflow_id", "workflow_type", "task_queue", "status", "input", "result", "failure", "create_time", "update_time", "close_time", "fence", "event_count", "wait", "cancel_requested", "trace_id", "namespace", "stuck_time", "run_id", "run_number", "previous_run_id", "next_run_id", "build_id", "reset_from_run_id", "forked_from_workflow_id", "forked_from_run_id", "copied_up_to_event_id", "parent_workflow_id", "parent_run_id", "parent_close_policy", "history_bytes")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CLOSE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STUCK_TIME_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    RESET_FROM_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    COPIED_UP_TO_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_CLOSE_POLICY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    workflow_type: str
    task_queue: str
    status: WorkflowStatus
    input: _payload_pb2.Payload
    result: _payload_pb2.Payload
    failure: Failure
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    close_time: _timestamp_pb2.Timestamp
    fence: int
    event_count: int
    wait: Wait
    cancel_requested: bool
    trace_id: str
    namespace: str
    stuck_time: _timestamp_pb2.Timestamp
    run_id: str
    run_number: int
    previous_run_id: str
    next_run_id: str
    build_id: str
    reset_from_run_id: str
    forked_from_workflow_id: str
    forked_from_run_id: str
    copied_up_to_event_id: int
    parent_workflow_id: str
    parent_run_id: str
    parent_close_policy: ParentClosePolicy
    history_bytes: int
    def __init__(self, workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., task_queue: _Optional[str] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., result: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., close_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fence: _Optional[int] = ..., event_count: _Optional[int] = ..., wait: _Optional[_Union[Wait, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., trace_id: _Optional[str] = ..., namespace: _Optional[str] = ..., stuck_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ..., run_number: _Optional[int] = ..., previous_run_id: _Optional[str] = ..., next_run_id: _Optional[str] = ..., build_id: _Optional[str] = ..., reset_from_run_id: _Optional[str] = ..., forked_from_workflow_id: _Optional[str] = ..., forked_from_run_id: _Optional[str] = ..., copied_up_to_event_id: _Optional[int] = ..., parent_workflow_id: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., parent_close_policy: _Optional[_Union[ParentClosePolicy, str]] = ..., history_bytes: _Optional[int] = ...) -> None: ...

class StepInfo(_message.Message):
    __slots__ = ("step_id", "name", "position", "succeeded", "output", "failure", "attempts", "complete_time", "fence", "status", "start_time", "next_retry_time", "heartbeat_details", "heartbeat_time", "output_omitted", "usage")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_RETRY_TIME_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OMITTED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    name: str
    position: int
    succeeded: bool
    output: _payload_pb2.Payload
    failure: Failure
    attempts: int
    complete_time: _timestamp_pb2.Timestamp
    fence: int
    status: StepStatus
    start_time: _timestamp_pb2.Timestamp
    next_retry_time: _timestamp_pb2.Timestamp
    heartbeat_details: _payload_pb2.Payload
    heartbeat_time: _timestamp_pb2.Timestamp
    output_omitted: bool
    usage: _flow_pb2.StepUsage
    def __init__(self, step_id: _Optional[str] = ..., name: _Optional[str] = ..., position: _Optional[int] = ..., succeeded: _Optional[bool] = ..., output: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., attempts: _Optional[int] = ..., complete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fence: _Optional[int] = ..., status: _Optional[_Union[StepStatus, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_retry_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., heartbeat_details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., output_omitted: _Optional[bool] = ..., usage: _Optional[_Union[_flow_pb2.StepUsage, _Mapping]] = ...) -> None: ...

class PendingSignal(_message.Message):
    __slots__ = ("name", "signal_id", "payload", "receive_time", "event_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    signal_id: str
    payload: _payload_pb2.Payload
    receive_time: _timestamp_pb2.Timestamp
    event_id: int
    def __init__(self, name: _Optional[str] = ..., signal_id: _Optional[str] = ..., payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., receive_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., event_id: _Optional[int] = ...) -> None: ...

class HistoryEvent(_message.Message):
    __slots__ = ("event_id", "event_type", "event_time", "fence", "step_id", "step_name", "position", "payload", "failure", "attempt", "due_time", "name", "signal_id", "consumed_event_ids", "start_time", "wait", "trace_context", "task_queue", "payload_ref", "child_workflow_id", "child_run_id", "approval_id", "usage")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_REF_FIELD_NUMBER: _ClassVar[int]
    CHILD_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    CHILD_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    event_type: EventType
    event_time: _timestamp_pb2.Timestamp
    fence: int
    step_id: str
    step_name: str
    position: int
    payload: _payload_pb2.Payload
    failure: Failure
    attempt: int
    due_time: _timestamp_pb2.Timestamp
    name: str
    signal_id: str
    consumed_event_ids: _containers.RepeatedScalarFieldContainer[int]
    start_time: _timestamp_pb2.Timestamp
    wait: Wait
    trace_context: _containers.ScalarMap[str, str]
    task_queue: str
    payload_ref: _payload_pb2.PayloadRef
    child_workflow_id: str
    child_run_id: str
    approval_id: str
    usage: _flow_pb2.StepUsage
    def __init__(self, event_id: _Optional[int] = ..., event_type: _Optional[_Union[EventType, str]] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., attempt: _Optional[int] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., name: _Optional[str] = ..., signal_id: _Optional[str] = ..., consumed_event_ids: _Optional[_Iterable[int]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., wait: _Optional[_Union[Wait, _Mapping]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., task_queue: _Optional[str] = ..., payload_ref: _Optional[_Union[_payload_pb2.PayloadRef, _Mapping]] = ..., child_workflow_id: _Optional[str] = ..., child_run_id: _Optional[str] = ..., approval_id: _Optional[str] = ..., usage: _Optional[_Union[_flow_pb2.StepUsage, _Mapping]] = ...) -> None: ...

class StreamFrame(_message.Message):
    __slots__ = ("seq", "stream", "step_id", "attempt", "kind", "data", "time")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    seq: int
    stream: str
    step_id: str
    attempt: int
    kind: FrameKind
    data: _payload_pb2.Payload
    time: _timestamp_pb2.Timestamp
    def __init__(self, seq: _Optional[int] = ..., stream: _Optional[str] = ..., step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., kind: _Optional[_Union[FrameKind, str]] = ..., data: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ChildWorkflow(_message.Message):
    __slots__ = ("step_id", "workflow_id", "run_id", "workflow_type", "status", "parent_close_policy")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PARENT_CLOSE_POLICY_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    workflow_id: str
    run_id: str
    workflow_type: str
    status: WorkflowStatus
    parent_close_policy: ParentClosePolicy
    def __init__(self, step_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., status: _Optional[_Union[WorkflowStatus, str]] = ..., parent_close_policy: _Optional[_Union[ParentClosePolicy, str]] = ...) -> None: ...

class Pause(_message.Message):
    __slots__ = ("scope", "name", "reason", "pause_time", "paused_by")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAUSE_TIME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    scope: PauseScope
    name: str
    reason: str
    pause_time: _timestamp_pb2.Timestamp
    paused_by: str
    def __init__(self, scope: _Optional[_Union[PauseScope, str]] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ..., pause_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paused_by: _Optional[str] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("approval_id", "namespace", "workflow_id", "run_id", "workflow_type", "name", "details", "details_sha256", "approvers", "escalate_to", "status", "create_time", "escalate_time", "expire_time", "escalated_time", "decided_by", "decide_time", "reason", "step_id")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    DETAILS_SHA256_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TO_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    ESCALATED_TIME_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str
    name: str
    details: _payload_pb2.Payload
    details_sha256: str
    approvers: _containers.RepeatedScalarFieldContainer[str]
    escalate_to: _containers.RepeatedScalarFieldContainer[str]
    status: ApprovalStatus
    create_time: _timestamp_pb2.Timestamp
    escalate_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    escalated_time: _timestamp_pb2.Timestamp
    decided_by: str
    decide_time: _timestamp_pb2.Timestamp
    reason: str
    step_id: str
    def __init__(self, approval_id: _Optional[str] = ..., namespace: _Optional[str] = ..., workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., name: _Optional[str] = ..., details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., details_sha256: _Optional[str] = ..., approvers: _Optional[_Iterable[str]] = ..., escalate_to: _Optional[_Iterable[str]] = ..., status: _Optional[_Union[ApprovalStatus, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., escalate_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., escalated_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decided_by: _Optional[str] = ..., decide_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., step_id: _Optional[str] = ...) -> None: ...
