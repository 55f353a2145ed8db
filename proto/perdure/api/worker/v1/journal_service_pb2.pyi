from google.protobuf import struct_pb2 as _struct_pb2
from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoadJournalRequest(_message.Message):
    __slots__ = ("workflow_id", "fence")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ...) -> None: ...

class LoadJournalResponse(_message.Message):
    __slots__ = ("workflow", "events")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    workflow: _workflow_pb2.WorkflowInfo
    events: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.HistoryEvent]
    def __init__(self, workflow: _Optional[_Union[_workflow_pb2.WorkflowInfo, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_workflow_pb2.HistoryEvent, _Mapping]]] = ...) -> None: ...

class RecordStepRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id", "step_name", "position", "attempt", "output", "failure")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_NAME_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int
    attempt: int
    output: _struct_pb2.Value
    failure: _workflow_pb2.Failure
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ..., step_name: _Optional[str] = ..., position: _Optional[int] = ..., attempt: _Optional[int] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., failure: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ...) -> None: ...

class RecordStepResponse(_message.Message):
    __slots__ = ("event_id",)
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    def __init__(self, event_id: _Optional[int] = ...) -> None: ...

class FinishWorkflowRequest(_message.Message):
    __slots__ = ("workflow_id", "fence", "result", "failure", "park")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    PARK_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    result: _struct_pb2.Value
    failure: _workflow_pb2.Failure
    park: _workflow_pb2.Failure
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., failure: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ..., park: _Optional[_Union[_workflow_pb2.Failure, _Mapping]] = ...) -> None: ...

class FinishWorkflowResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _workflow_pb2.WorkflowStatus
    def __init__(self, status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ...) -> None: ...
