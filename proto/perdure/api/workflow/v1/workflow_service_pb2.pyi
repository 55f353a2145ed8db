import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from perdure.api.common.v1 import payload_pb2 as _payload_pb2
from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IdReusePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ID_REUSE_POLICY_UNSPECIFIED: _ClassVar[IdReusePolicy]
    ID_REUSE_POLICY_REFUSE: _ClassVar[IdReusePolicy]
    ID_REUSE_POLICY_ALLOW: _ClassVar[IdReusePolicy]
    ID_REUSE_POLICY_ALLOW_IF_FAILED: _ClassVar[IdReusePolicy]
ID_REUSE_POLICY_UNSPECIFIED: IdReusePolicy
ID_REUSE_POLICY_REFUSE: IdReusePolicy
ID_REUSE_POLICY_ALLOW: IdReusePolicy
ID_REUSE_POLICY_ALLOW_IF_FAILED: IdReusePolicy

class StartWorkflowRequest(_message.Message):
    __slots__ = ("workflow_type", "workflow_id", "task_queue", "input", "namespace", "execution_timeout", "id_reuse_policy", "request_id", "flow", "debounce_key", "debounce_window", "singleton_key")
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ID_REUSE_POLICY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_KEY_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_WINDOW_FIELD_NUMBER: _ClassVar[int]
    SINGLETON_KEY_FIELD_NUMBER: _ClassVar[int]
    workflow_type: str
    workflow_id: str
    task_queue: str
    input: _payload_pb2.Payload
    namespace: str
    execution_timeout: _duration_pb2.Duration
    id_reuse_policy: IdReusePolicy
    request_id: str
    flow: _flow_pb2.RunFlow
    debounce_key: str
    debounce_window: _duration_pb2.Duration
    singleton_key: str
    def __init__(self, workflow_type: _Optional[str] = ..., workflow_id: _Optional[str] = ..., task_queue: _Optional[str] = ..., input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., namespace: _Optional[str] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., id_reuse_policy: _Optional[_Union[IdReusePolicy, str]] = ..., request_id: _Optional[str] = ..., flow: _Optional[_Union[_flow_pb2.RunFlow, _Mapping]] = ..., debounce_key: _Optional[str] = ..., debounce_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., singleton_key: _Optional[str] = ...) -> None: ...

class StartWorkflowResponse(_message.Message):
    __slots__ = ("workflow_id", "started", "status", "run_id", "debounced", "singleton")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    SINGLETON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    started: bool
    status: _workflow_pb2.WorkflowStatus
    run_id: str
    debounced: bool
    singleton: bool
    def __init__(self, workflow_id: _Optional[str] = ..., started: _Optional[bool] = ..., status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ..., run_id: _Optional[str] = ..., debounced: _Optional[bool] = ..., singleton: _Optional[bool] = ...) -> None: ...

class DescribeWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class DescribeWorkflowResponse(_message.Message):
    __slots__ = ("workflow", "steps", "current_step", "pending_signals", "state", "flow", "children", "pauses", "pending_approvals")
    class StateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _payload_pb2.Payload
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ...) -> None: ...
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STEP_FIELD_NUMBER: _ClassVar[int]
    PENDING_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    PAUSES_FIELD_NUMBER: _ClassVar[int]
    PENDING_APPROVALS_FIELD_NUMBER: _ClassVar[int]
    workflow: _workflow_pb2.WorkflowInfo
    steps: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.StepInfo]
    current_step: str
    pending_signals: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.PendingSignal]
    state: _containers.MessageMap[str, _payload_pb2.Payload]
    flow: _flow_pb2.RunFlowStatus
    children: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.ChildWorkflow]
    pauses: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.Pause]
    pending_approvals: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.Approval]
    def __init__(self, workflow: _Optional[_Union[_workflow_pb2.WorkflowInfo, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[_workflow_pb2.StepInfo, _Mapping]]] = ..., current_step: _Optional[str] = ..., pending_signals: _Optional[_Iterable[_Union[_workflow_pb2.PendingSignal, _Mapping]]] = ..., state: _Optional[_Mapping[str, _payload_pb2.Payload]] = ..., flow: _Optional[_Union[_flow_pb2.RunFlowStatus, _Mapping]] = ..., children: _Optional[_Iterable[_Union[_workflow_pb2.ChildWorkflow, _Mapping]]] = ..., pauses: _Optional[_Iterable[_Union[_workflow_pb2.Pause, _Mapping]]] = ..., pending_approvals: _Optional[_Iterable[_Union[_workflow_pb2.Approval, _Mapping]]] = ...) -> None: ...

class GetWorkflowHistoryRequest(_message.Message):
    __slots__ = ("workflow_id", "page_size", "page_token", "namespace", "after_event_id", "run_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    page_size: int
    page_token: str
    namespace: str
    after_event_id: int
    run_id: str
    def __init__(self, workflow_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., namespace: _Optional[str] = ..., after_event_id: _Optional[int] = ..., run_id: _Optional[str] = ...) -> None: ...

class GetWorkflowHistoryResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.HistoryEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_workflow_pb2.HistoryEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "status", "workflow_type", "namespace", "workflow_id_prefix", "stuck", "parent_workflow_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    STUCK_FIELD_NUMBER: _ClassVar[int]
    PARENT_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    status: _workflow_pb2.WorkflowStatus
    workflow_type: str
    namespace: str
    workflow_id_prefix: str
    stuck: bool
    parent_workflow_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ..., workflow_type: _Optional[str] = ..., namespace: _Optional[str] = ..., workflow_id_prefix: _Optional[str] = ..., stuck: _Optional[bool] = ..., parent_workflow_id: _Optional[str] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows", "next_page_token")
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.WorkflowInfo]
    next_page_token: str
    def __init__(self, workflows: _Optional[_Iterable[_Union[_workflow_pb2.WorkflowInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SignalWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "signal_name", "payload", "signal_id", "namespace")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    signal_name: str
    payload: _payload_pb2.Payload
    signal_id: str
    namespace: str
    def __init__(self, workflow_id: _Optional[str] = ..., signal_name: _Optional[str] = ..., payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., signal_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class SignalWorkflowResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    def __init__(self, accepted: _Optional[bool] = ...) -> None: ...

class SignalWithStartWorkflowRequest(_message.Message):
    __slots__ = ("start", "signal_name", "payload", "signal_id")
    START_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    start: StartWorkflowRequest
    signal_name: str
    payload: _payload_pb2.Payload
    signal_id: str
    def __init__(self, start: _Optional[_Union[StartWorkflowRequest, _Mapping]] = ..., signal_name: _Optional[str] = ..., payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., signal_id: _Optional[str] = ...) -> None: ...

class SignalWithStartWorkflowResponse(_message.Message):
    __slots__ = ("started", "accepted")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    started: bool
    accepted: bool
    def __init__(self, started: _Optional[bool] = ..., accepted: _Optional[bool] = ...) -> None: ...

class CancelWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "reason", "namespace")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    reason: str
    namespace: str
    def __init__(self, workflow_id: _Optional[str] = ..., reason: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class CancelWorkflowResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TerminateWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "reason", "namespace")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    reason: str
    namespace: str
    def __init__(self, workflow_id: _Optional[str] = ..., reason: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class TerminateWorkflowResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueryWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "key", "namespace")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    key: str
    namespace: str
    def __init__(self, workflow_id: _Optional[str] = ..., key: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class QueryWorkflowResponse(_message.Message):
    __slots__ = ("value", "update_time")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    value: _payload_pb2.Payload
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, value: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResumeWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "reason")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    reason: str
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResumeWorkflowResponse(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ResetWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "step_id", "event_id", "reason")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    step_id: str
    event_id: int
    reason: str
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., step_id: _Optional[str] = ..., event_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ResetWorkflowResponse(_message.Message):
    __slots__ = ("run_id", "copied_up_to_event_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    COPIED_UP_TO_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    copied_up_to_event_id: int
    def __init__(self, run_id: _Optional[str] = ..., copied_up_to_event_id: _Optional[int] = ...) -> None: ...

class ForkWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "new_workflow_id", "step_id", "overrides", "reason")
    class OverridesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _payload_pb2.Payload
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ...) -> None: ...
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    new_workflow_id: str
    step_id: str
    overrides: _containers.MessageMap[str, _payload_pb2.Payload]
    reason: str
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., new_workflow_id: _Optional[str] = ..., step_id: _Optional[str] = ..., overrides: _Optional[_Mapping[str, _payload_pb2.Payload]] = ..., reason: _Optional[str] = ...) -> None: ...

class ForkWorkflowResponse(_message.Message):
    __slots__ = ("workflow_id", "run_id", "copied_up_to_event_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    COPIED_UP_TO_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    run_id: str
    copied_up_to_event_id: int
    def __init__(self, workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., copied_up_to_event_id: _Optional[int] = ...) -> None: ...

class WatchWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "after_event_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    after_event_id: int
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., after_event_id: _Optional[int] = ...) -> None: ...

class WatchWorkflowResponse(_message.Message):
    __slots__ = ("events", "workflow", "closed")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.HistoryEvent]
    workflow: _workflow_pb2.WorkflowInfo
    closed: bool
    def __init__(self, events: _Optional[_Iterable[_Union[_workflow_pb2.HistoryEvent, _Mapping]]] = ..., workflow: _Optional[_Union[_workflow_pb2.WorkflowInfo, _Mapping]] = ..., closed: _Optional[bool] = ...) -> None: ...

class GetWorkflowResultRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "wait")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    wait: _duration_pb2.Duration
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GetWorkflowResultResponse(_message.Message):
    __slots__ = ("workflow", "closed")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    workflow: _workflow_pb2.WorkflowInfo
    closed: bool
    def __init__(self, workflow: _Optional[_Union[_workflow_pb2.WorkflowInfo, _Mapping]] = ..., closed: _Optional[bool] = ...) -> None: ...

class ReadStreamRequest(_message.Message):
    __slots__ = ("workflow_id", "namespace", "run_id", "stream", "after_seq", "follow")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    namespace: str
    run_id: str
    stream: str
    after_seq: int
    follow: bool
    def __init__(self, workflow_id: _Optional[str] = ..., namespace: _Optional[str] = ..., run_id: _Optional[str] = ..., stream: _Optional[str] = ..., after_seq: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class ReadStreamResponse(_message.Message):
    __slots__ = ("frames", "end", "status")
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.StreamFrame]
    end: bool
    status: _workflow_pb2.WorkflowStatus
    def __init__(self, frames: _Optional[_Iterable[_Union[_workflow_pb2.StreamFrame, _Mapping]]] = ..., end: _Optional[bool] = ..., status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ...) -> None: ...
