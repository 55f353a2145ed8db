from perdure.api.admin.v1 import admin_service_pb2 as _admin_service_pb2
from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from perdure.api.workflow.v1 import workflow_service_pb2 as _workflow_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.StartWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.StartWorkflowRequest, _Mapping]] = ...) -> None: ...

class StartWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.StartWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.StartWorkflowResponse, _Mapping]] = ...) -> None: ...

class DescribeWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.DescribeWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.DescribeWorkflowRequest, _Mapping]] = ...) -> None: ...

class DescribeWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.DescribeWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.DescribeWorkflowResponse, _Mapping]] = ...) -> None: ...

class GetWorkflowHistoryRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.GetWorkflowHistoryRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.GetWorkflowHistoryRequest, _Mapping]] = ...) -> None: ...

class GetWorkflowHistoryResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.GetWorkflowHistoryResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.GetWorkflowHistoryResponse, _Mapping]] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.ListWorkflowsRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.ListWorkflowsRequest, _Mapping]] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.ListWorkflowsResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.ListWorkflowsResponse, _Mapping]] = ...) -> None: ...

class SignalWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.SignalWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.SignalWorkflowRequest, _Mapping]] = ...) -> None: ...

class SignalWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.SignalWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.SignalWorkflowResponse, _Mapping]] = ...) -> None: ...

class SignalWithStartWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.SignalWithStartWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.SignalWithStartWorkflowRequest, _Mapping]] = ...) -> None: ...

class SignalWithStartWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.SignalWithStartWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.SignalWithStartWorkflowResponse, _Mapping]] = ...) -> None: ...

class CancelWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.CancelWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.CancelWorkflowRequest, _Mapping]] = ...) -> None: ...

class CancelWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.CancelWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.CancelWorkflowResponse, _Mapping]] = ...) -> None: ...

class TerminateWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.TerminateWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.TerminateWorkflowRequest, _Mapping]] = ...) -> None: ...

class TerminateWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.TerminateWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.TerminateWorkflowResponse, _Mapping]] = ...) -> None: ...

class QueryWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.QueryWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.QueryWorkflowRequest, _Mapping]] = ...) -> None: ...

class QueryWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.QueryWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.QueryWorkflowResponse, _Mapping]] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.CreateApiKeyRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.CreateApiKeyRequest, _Mapping]] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.CreateApiKeyResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.CreateApiKeyResponse, _Mapping]] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.RevokeApiKeyRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.RevokeApiKeyRequest, _Mapping]] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.RevokeApiKeyResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.RevokeApiKeyResponse, _Mapping]] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListApiKeysRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListApiKeysRequest, _Mapping]] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListApiKeysResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListApiKeysResponse, _Mapping]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListAuditEventsRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListAuditEventsRequest, _Mapping]] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListAuditEventsResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListAuditEventsResponse, _Mapping]] = ...) -> None: ...

class AuditPauseRequest(_message.Message):
    __slots__ = ("namespace", "paused", "scope", "name", "reason", "changed")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    paused: bool
    scope: _workflow_pb2.PauseScope
    name: str
    reason: str
    changed: bool
    def __init__(self, namespace: _Optional[str] = ..., paused: _Optional[bool] = ..., scope: _Optional[_Union[_workflow_pb2.PauseScope, str]] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ..., changed: _Optional[bool] = ...) -> None: ...

class AuditPauseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AuthenticateRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class AuthenticateResponse(_message.Message):
    __slots__ = ("key_id", "namespace", "role", "task_queues")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUES_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    namespace: str
    role: _admin_service_pb2.Role
    task_queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_id: _Optional[str] = ..., namespace: _Optional[str] = ..., role: _Optional[_Union[_admin_service_pb2.Role, str]] = ..., task_queues: _Optional[_Iterable[str]] = ...) -> None: ...

class ResumeWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.ResumeWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.ResumeWorkflowRequest, _Mapping]] = ...) -> None: ...

class ResumeWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.ResumeWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.ResumeWorkflowResponse, _Mapping]] = ...) -> None: ...

class ResetWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.ResetWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.ResetWorkflowRequest, _Mapping]] = ...) -> None: ...

class ResetWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.ResetWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.ResetWorkflowResponse, _Mapping]] = ...) -> None: ...

class ForkWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.ForkWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.ForkWorkflowRequest, _Mapping]] = ...) -> None: ...

class ForkWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.ForkWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.ForkWorkflowResponse, _Mapping]] = ...) -> None: ...

class CountOpenRunsByBuildRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class BuildRunCount(_message.Message):
    __slots__ = ("task_queue", "build_id", "workflow_type", "open_runs")
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    OPEN_RUNS_FIELD_NUMBER: _ClassVar[int]
    task_queue: str
    build_id: str
    workflow_type: str
    open_runs: int
    def __init__(self, task_queue: _Optional[str] = ..., build_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., open_runs: _Optional[int] = ...) -> None: ...

class CountOpenRunsByBuildResponse(_message.Message):
    __slots__ = ("counts",)
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[BuildRunCount]
    def __init__(self, counts: _Optional[_Iterable[_Union[BuildRunCount, _Mapping]]] = ...) -> None: ...

class WatchWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.WatchWorkflowRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.WatchWorkflowRequest, _Mapping]] = ...) -> None: ...

class WatchWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.WatchWorkflowResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.WatchWorkflowResponse, _Mapping]] = ...) -> None: ...

class GetWorkflowResultRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.GetWorkflowResultRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.GetWorkflowResultRequest, _Mapping]] = ...) -> None: ...

class GetWorkflowResultResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.GetWorkflowResultResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.GetWorkflowResultResponse, _Mapping]] = ...) -> None: ...

class ReadStreamRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _workflow_service_pb2.ReadStreamRequest
    def __init__(self, request: _Optional[_Union[_workflow_service_pb2.ReadStreamRequest, _Mapping]] = ...) -> None: ...

class ReadStreamResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _workflow_service_pb2.ReadStreamResponse
    def __init__(self, response: _Optional[_Union[_workflow_service_pb2.ReadStreamResponse, _Mapping]] = ...) -> None: ...

class GetStorageRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.GetStorageRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.GetStorageRequest, _Mapping]] = ...) -> None: ...

class GetStorageResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.GetStorageResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.GetStorageResponse, _Mapping]] = ...) -> None: ...

class ExportWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ExportWorkflowRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ExportWorkflowRequest, _Mapping]] = ...) -> None: ...

class ExportWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ExportWorkflowResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ExportWorkflowResponse, _Mapping]] = ...) -> None: ...

class ImportWorkflowRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ImportWorkflowRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ImportWorkflowRequest, _Mapping]] = ...) -> None: ...

class ImportWorkflowResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ImportWorkflowResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ImportWorkflowResponse, _Mapping]] = ...) -> None: ...

class GetRetentionRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.GetRetentionRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.GetRetentionRequest, _Mapping]] = ...) -> None: ...

class GetRetentionResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.GetRetentionResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.GetRetentionResponse, _Mapping]] = ...) -> None: ...

class SetRetentionRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.SetRetentionRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.SetRetentionRequest, _Mapping]] = ...) -> None: ...

class SetRetentionResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.SetRetentionResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.SetRetentionResponse, _Mapping]] = ...) -> None: ...
