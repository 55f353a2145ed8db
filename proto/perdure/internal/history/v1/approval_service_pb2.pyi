from perdure.api.workflow.v1 import approval_service_pb2 as _approval_service_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListApprovalsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _approval_service_pb2.ListApprovalsRequest
    def __init__(self, request: _Optional[_Union[_approval_service_pb2.ListApprovalsRequest, _Mapping]] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _approval_service_pb2.ListApprovalsResponse
    def __init__(self, response: _Optional[_Union[_approval_service_pb2.ListApprovalsResponse, _Mapping]] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _approval_service_pb2.GetApprovalRequest
    def __init__(self, request: _Optional[_Union[_approval_service_pb2.GetApprovalRequest, _Mapping]] = ...) -> None: ...

class GetApprovalResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _approval_service_pb2.GetApprovalResponse
    def __init__(self, response: _Optional[_Union[_approval_service_pb2.GetApprovalResponse, _Mapping]] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("request", "key_id", "role")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    request: _approval_service_pb2.DecideApprovalRequest
    key_id: str
    role: int
    def __init__(self, request: _Optional[_Union[_approval_service_pb2.DecideApprovalRequest, _Mapping]] = ..., key_id: _Optional[str] = ..., role: _Optional[int] = ...) -> None: ...

class DecideApprovalResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _approval_service_pb2.DecideApprovalResponse
    def __init__(self, response: _Optional[_Union[_approval_service_pb2.DecideApprovalResponse, _Mapping]] = ...) -> None: ...
