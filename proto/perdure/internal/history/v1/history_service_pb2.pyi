from perdure.api.workflow.v1 import workflow_service_pb2 as _workflow_service_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
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
