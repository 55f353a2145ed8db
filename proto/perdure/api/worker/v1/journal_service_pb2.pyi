import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from perdure.api.common.v1 import payload_pb2 as _payload_pb2
from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoadJournalRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "after_event_id", "build_id", "lease_proof", "later_page")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_PROOF_FIELD_NUMBER: _ClassVar[int]
    LATER_PAGE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    after_event_id: int
    build_id: str
    lease_proof: bytes
    later_page: bool
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., after_event_id: _Optional[int] = ..., build_id: _Optional[str] = ..., lease_proof: _Optional[bytes] = ..., later_page: _Optional[bool] = ...) -> None: ...

class LoadJournalResponse(_message.Message):
    __slots__ = ("workflow", "events", "now", "progress", "more", "previous_fence", "history_length", "history_bytes", "clock")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FENCE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_LENGTH_FIELD_NUMBER: _ClassVar[int]
    HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    workflow: _workflow_pb2.WorkflowInfo
    events: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.HistoryEvent]
    now: _timestamp_pb2.Timestamp
    progress: _containers.RepeatedCompositeFieldContainer[StepProgress]
    more: bool
    previous_fence: int
    history_length: int
    history_bytes: int
    clock: _timestamp_pb2.Timestamp
    def __init__(self, workflow: _Optional[_Union[_workflow_pb2.WorkflowInfo, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_workflow_pb2.HistoryEvent, _Mapping]]] = ..., now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Iterable[_Union[StepProgress, _Mapping]]] = ..., more: _Optional[bool] = ..., previous_fence: _Optional[int] = ..., history_length: _Optional[int] = ..., history_bytes: _Optional[int] = ..., clock: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LoadPayloadRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "sha256")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    sha256: bytes
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., sha256: _Optional[bytes] = ...) -> None: ...

class LoadPayloadResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: _payload_pb2.Payload
    def __init__(self, payload: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ...) -> None: ...

class StepProgress(_message.Message):
    __slots__ = ("step_id", "attempt", "details", "update_time")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    step_id: str
    attempt: int
    details: _payload_pb2.Payload
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecordStepRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "attempt", "output", "failure", "start_time", "retry_delay", "step_task", "attempt_started", "unless_cancel_requested", "usage")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    STEP_TASK_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_STARTED_FIELD_NUMBER: _ClassVar[int]
    UNLESS_CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    attempt: int
    output: _payload_pb2.Payload
    failure: _workflow_pb2.Failure
    start_time: _timestamp_pb2.Timestamp
    retry_delay: _duration_pb2.Duration
    step_task: bool
    attempt_started: bool
    unless_cancel_requested: bool
    usage: _flow_pb2.StepUsage
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., attempt: _Optional[int] = ..., output: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., failure: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., step_task: _Optional[bool] = ..., attempt_started: _Optional[bool] = ..., unless_cancel_requested: _Optional[bool] = ..., usage: _Optional[_Union[_flow_pb2.StepUsage, _Mapping]] = ...) -> None: ...

class RecordStepResponse(_message.Message):
    __slots__ = ("event_id", "retry_time", "cancel_requested")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    retry_time: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, event_id: _Optional[int] = ..., retry_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class StartTimerRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "delay", "fire_time")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    delay: _duration_pb2.Duration
    fire_time: _timestamp_pb2.Timestamp
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StartTimerResponse(_message.Message):
    __slots__ = ("fire_time", "cancel_requested", "event_id")
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    fire_time: _timestamp_pb2.Timestamp
    cancel_requested: bool
    event_id: int
    def __init__(self, fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., event_id: _Optional[int] = ...) -> None: ...

class ConsumeSignalsRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "signal_name", "event_ids", "result", "timed_out")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    signal_name: str
    event_ids: _containers.RepeatedScalarFieldContainer[int]
    result: _payload_pb2.Payload
    timed_out: bool
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., signal_name: _Optional[str] = ..., event_ids: _Optional[_Iterable[int]] = ..., result: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class ConsumeSignalsResponse(_message.Message):
    __slots__ = ("cancel_requested", "event_id")
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    event_id: int
    def __init__(self, cancel_requested: _Optional[bool] = ..., event_id: _Optional[int] = ...) -> None: ...

class SetStateRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "key", "value")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    key: str
    value: _payload_pb2.Payload
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., key: _Optional[str] = ..., value: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ...) -> None: ...

class SetStateResponse(_message.Message):
    __slots__ = ("cancel_requested", "event_id")
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    event_id: int
    def __init__(self, cancel_requested: _Optional[bool] = ..., event_id: _Optional[int] = ...) -> None: ...

class RecordPatchRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "patch_id", "position")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    PATCH_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    patch_id: str
    position: int
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., patch_id: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class RecordPatchResponse(_message.Message):
    __slots__ = ("cancel_requested", "event_id")
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    event_id: int
    def __init__(self, cancel_requested: _Optional[bool] = ..., event_id: _Optional[int] = ...) -> None: ...

class StartChildRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "child_workflow_id", "task_queue", "input", "parent_close_policy")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CHILD_WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PARENT_CLOSE_POLICY_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    child_workflow_id: str
    task_queue: str
    input: _payload_pb2.Payload
    parent_close_policy: _workflow_pb2.ParentClosePolicy
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., child_workflow_id: _Optional[str] = ..., task_queue: _Optional[str] = ..., input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., parent_close_policy: _Optional[_Union[_workflow_pb2.ParentClosePolicy, str]] = ...) -> None: ...

class StartChildResponse(_message.Message):
    __slots__ = ("event_id", "cancel_requested", "child_run_id", "failure")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CHILD_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    cancel_requested: bool
    child_run_id: str
    failure: _workflow_pb2.Failure
    def __init__(self, event_id: _Optional[int] = ..., cancel_requested: _Optional[bool] = ..., child_run_id: _Optional[str] = ..., failure: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ...) -> None: ...

class EmitFramesRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "attempt", "stream", "first_index", "chunks", "step_task")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    FIRST_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    STEP_TASK_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    attempt: int
    stream: str
    first_index: int
    chunks: _containers.RepeatedCompositeFieldContainer[_payload_pb2.Payload]
    step_task: bool
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., stream: _Optional[str] = ..., first_index: _Optional[int] = ..., chunks: _Optional[_Iterable[_Union[_payload_pb2.Payload, _Mapping]]] = ..., step_task: _Optional[bool] = ...) -> None: ...

class EmitFramesResponse(_message.Message):
    __slots__ = ("last_seq", "cancel_requested")
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    last_seq: int
    cancel_requested: bool
    def __init__(self, last_seq: _Optional[int] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class RecordCancellationRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class RecordCancellationResponse(_message.Message):
    __slots__ = ("event_id",)
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    def __init__(self, event_id: _Optional[int] = ...) -> None: ...

class RecordHeartbeatRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "attempt", "details", "step_task")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    STEP_TASK_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    attempt: int
    details: _payload_pb2.Payload
    step_task: bool
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., step_task: _Optional[bool] = ...) -> None: ...

class RecordHeartbeatResponse(_message.Message):
    __slots__ = ("cancel_requested",)
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    cancel_requested: bool
    def __init__(self, cancel_requested: _Optional[bool] = ...) -> None: ...

class SuspendWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "wait")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    wait: _workflow_pb2.Wait
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., wait: _Optional[_Union[_workflow_pb2.Wait, _Mapping]] = ...) -> None: ...

class SuspendWorkflowResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("initial_interval", "backoff_coefficient", "maximum_interval", "maximum_attempts", "non_retryable_error_types")
    INITIAL_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_COEFFICIENT_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_ERROR_TYPES_FIELD_NUMBER: _ClassVar[int]
    initial_interval: _duration_pb2.Duration
    backoff_coefficient: float
    maximum_interval: _duration_pb2.Duration
    maximum_attempts: int
    non_retryable_error_types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, initial_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_coefficient: _Optional[float] = ..., maximum_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., maximum_attempts: _Optional[int] = ..., non_retryable_error_types: _Optional[_Iterable[str]] = ...) -> None: ...

class ScheduleStepRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "task_queue", "input", "retry", "timeout", "heartbeat_timeout", "flow")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    task_queue: str
    input: _payload_pb2.Payload
    retry: RetryPolicy
    timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    flow: _flow_pb2.StepFlow
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., task_queue: _Optional[str] = ..., input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., flow: _Optional[_Union[_flow_pb2.StepFlow, _Mapping]] = ...) -> None: ...

class ScheduleStepResponse(_message.Message):
    __slots__ = ("event_id", "cancel_requested")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    cancel_requested: bool
    def __init__(self, event_id: _Optional[int] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class LoadStepRequest(_message.Message):
    __slots__ = ("workflow_id", "step_id", "fence", "lease_proof")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    LEASE_PROOF_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    step_id: str
    fence: int
    lease_proof: bytes
    def __init__(self, workflow_id: _Optional[str] = ..., step_id: _Optional[str] = ..., fence: _Optional[int] = ..., lease_proof: _Optional[bytes] = ...) -> None: ...

class LoadStepResponse(_message.Message):
    __slots__ = ("workflow_type", "step_type", "input", "attempt", "retry", "timeout", "heartbeat_details", "heartbeat_timeout", "attempt_lost")
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_DETAILS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_LOST_FIELD_NUMBER: _ClassVar[int]
    workflow_type: str
    step_type: str
    input: _payload_pb2.Payload
    attempt: int
    retry: RetryPolicy
    timeout: _duration_pb2.Duration
    heartbeat_details: _payload_pb2.Payload
    heartbeat_timeout: _duration_pb2.Duration
    attempt_lost: bool
    def __init__(self, workflow_type: _Optional[str] = ..., step_type: _Optional[str] = ..., input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., attempt: _Optional[int] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., attempt_lost: _Optional[bool] = ...) -> None: ...

class FinishWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "result", "failure", "park", "cancelled", "continue_as_new")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    PARK_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_AS_NEW_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    result: _payload_pb2.Payload
    failure: _workflow_pb2.Failure
    park: _workflow_pb2.Failure
    cancelled: _workflow_pb2.Failure
    continue_as_new: ContinueAsNew
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., result: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., failure: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ..., park: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ..., cancelled: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ..., continue_as_new: _Optional[_Union[ContinueAsNew, _Mapping]] = ...) -> None: ...

class ContinueAsNew(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: _payload_pb2.Payload
    def __init__(self, input: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ...) -> None: ...

class FinishWorkflowResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _workflow_pb2.WorkflowStatus
    def __init__(self, status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[JournalCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[JournalCall, _Mapping]]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[JournalAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[JournalAnswer, _Mapping]]] = ...) -> None: ...

class JournalCall(_message.Message):
    __slots__ = ("id", "trace_context", "load_journal", "record_step", "finish_workflow", "start_timer", "consume_signals", "set_state", "record_cancellation", "record_heartbeat", "suspend_workflow", "schedule_step", "load_step", "load_payload", "record_patch", "emit_frames", "start_child", "request_approval")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LOAD_JOURNAL_FIELD_NUMBER: _ClassVar[int]
    RECORD_STEP_FIELD_NUMBER: _ClassVar[int]
    FINISH_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    START_TIMER_FIELD_NUMBER: _ClassVar[int]
    CONSUME_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    SET_STATE_FIELD_NUMBER: _ClassVar[int]
    RECORD_CANCELLATION_FIELD_NUMBER: _ClassVar[int]
    RECORD_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_STEP_FIELD_NUMBER: _ClassVar[int]
    LOAD_STEP_FIELD_NUMBER: _ClassVar[int]
    LOAD_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RECORD_PATCH_FIELD_NUMBER: _ClassVar[int]
    EMIT_FRAMES_FIELD_NUMBER: _ClassVar[int]
    START_CHILD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    id: int
    trace_context: _containers.ScalarMap[str, str]
    load_journal: LoadJournalRequest
    record_step: RecordStepRequest
    finish_workflow: FinishWorkflowRequest
    start_timer: StartTimerRequest
    consume_signals: ConsumeSignalsRequest
    set_state: SetStateRequest
    record_cancellation: RecordCancellationRequest
    record_heartbeat: RecordHeartbeatRequest
    suspend_workflow: SuspendWorkflowRequest
    schedule_step: ScheduleStepRequest
    load_step: LoadStepRequest
    load_payload: LoadPayloadRequest
    record_patch: RecordPatchRequest
    emit_frames: EmitFramesRequest
    start_child: StartChildRequest
    request_approval: RequestApprovalRequest
    def __init__(self, id: _Optional[int] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., load_journal: _Optional[_Union[LoadJournalRequest, _Mapping]] = ..., record_step: _Optional[_Union[RecordStepRequest, _Mapping]] = ..., finish_workflow: _Optional[_Union[FinishWorkflowRequest, _Mapping]] = ..., start_timer: _Optional[_Union[StartTimerRequest, _Mapping]] = ..., consume_signals: _Optional[_Union[ConsumeSignalsRequest, _Mapping]] = ..., set_state: _Optional[_Union[SetStateRequest, _Mapping]] = ..., record_cancellation: _Optional[_Union[RecordCancellationRequest, _Mapping]] = ..., record_heartbeat: _Optional[_Union[RecordHeartbeatRequest, _Mapping]] = ..., suspend_workflow: _Optional[_Union[SuspendWorkflowRequest, _Mapping]] = ..., schedule_step: _Optional[_Union[ScheduleStepRequest, _Mapping]] = ..., load_step: _Optional[_Union[LoadStepRequest, _Mapping]] = ..., load_payload: _Optional[_Union[LoadPayloadRequest, _Mapping]] = ..., record_patch: _Optional[_Union[RecordPatchRequest, _Mapping]] = ..., emit_frames: _Optional[_Union[EmitFramesRequest, _Mapping]] = ..., start_child: _Optional[_Union[StartChildRequest, _Mapping]] = ..., request_approval: _Optional[_Union[RequestApprovalRequest, _Mapping]] = ...) -> None: ...

class JournalAnswer(_message.Message):
    __slots__ = ("id", "error", "load_journal", "record_step", "finish_workflow", "start_timer", "consume_signals", "set_state", "record_cancellation", "record_heartbeat", "suspend_workflow", "schedule_step", "load_step", "load_payload", "record_patch", "emit_frames", "start_child", "request_approval")
    ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOAD_JOURNAL_FIELD_NUMBER: _ClassVar[int]
    RECORD_STEP_FIELD_NUMBER: _ClassVar[int]
    FINISH_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    START_TIMER_FIELD_NUMBER: _ClassVar[int]
    CONSUME_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    SET_STATE_FIELD_NUMBER: _ClassVar[int]
    RECORD_CANCELLATION_FIELD_NUMBER: _ClassVar[int]
    RECORD_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SUSPEND_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_STEP_FIELD_NUMBER: _ClassVar[int]
    LOAD_STEP_FIELD_NUMBER: _ClassVar[int]
    LOAD_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RECORD_PATCH_FIELD_NUMBER: _ClassVar[int]
    EMIT_FRAMES_FIELD_NUMBER: _ClassVar[int]
    START_CHILD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    id: int
    error: SessionError
    load_journal: LoadJournalResponse
    record_step: RecordStepResponse
    finish_workflow: FinishWorkflowResponse
    start_timer: StartTimerResponse
    consume_signals: ConsumeSignalsResponse
    set_state: SetStateResponse
    record_cancellation: RecordCancellationResponse
    record_heartbeat: RecordHeartbeatResponse
    suspend_workflow: SuspendWorkflowResponse
    schedule_step: ScheduleStepResponse
    load_step: LoadStepResponse
    load_payload: LoadPayloadResponse
    record_patch: RecordPatchResponse
    emit_frames: EmitFramesResponse
    start_child: StartChildResponse
    request_approval: RequestApprovalResponse
    def __init__(self, id: _Optional[int] = ..., error: _Optional[_Union[SessionError, _Mapping]] = ..., load_journal: _Optional[_Union[LoadJournalResponse, _Mapping]] = ..., record_step: _Optional[_Union[RecordStepResponse, _Mapping]] = ..., finish_workflow: _Optional[_Union[FinishWorkflowResponse, _Mapping]] = ..., start_timer: _Optional[_Union[StartTimerResponse, _Mapping]] = ..., consume_signals: _Optional[_Union[ConsumeSignalsResponse, _Mapping]] = ..., set_state: _Optional[_Union[SetStateResponse, _Mapping]] = ..., record_cancellation: _Optional[_Union[RecordCancellationResponse, _Mapping]] = ..., record_heartbeat: _Optional[_Union[RecordHeartbeatResponse, _Mapping]] = ..., suspend_workflow: _Optional[_Union[SuspendWorkflowResponse, _Mapping]] = ..., schedule_step: _Optional[_Union[ScheduleStepResponse, _Mapping]] = ..., load_step: _Optional[_Union[LoadStepResponse, _Mapping]] = ..., load_payload: _Optional[_Union[LoadPayloadResponse, _Mapping]] = ..., record_patch: _Optional[_Union[RecordPatchResponse, _Mapping]] = ..., emit_frames: _Optional[_Union[EmitFramesResponse, _Mapping]] = ..., start_child: _Optional[_Union[StartChildResponse, _Mapping]] = ..., request_approval: _Optional[_Union[RequestApprovalResponse, _Mapping]] = ...) -> None: ...

class SessionError(_message.Message):
    __slots__ = ("code", "message", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RequestApprovalRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "name", "details", "timeout", "escalate_after", "approvers", "escalate_to")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_AFTER_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TO_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    name: str
    details: _payload_pb2.Payload
    timeout: _duration_pb2.Duration
    escalate_after: _duration_pb2.Duration
    approvers: _containers.RepeatedScalarFieldContainer[str]
    escalate_to: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., name: _Optional[str] = ..., details: _Optional[_Union[_payload_pb2.Payload, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., escalate_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., approvers: _Optional[_Iterable[str]] = ..., escalate_to: _Optional[_Iterable[str]] = ...) -> None: ...

class RequestApprovalResponse(_message.Message):
    __slots__ = ("event_id", "approval_id", "expire_time", "escalate_time", "cancel_requested")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    approval_id: str
    expire_time: _timestamp_pb2.Timestamp
    escalate_time: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, event_id: _Optional[int] = ..., approval_id: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., escalate_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...
