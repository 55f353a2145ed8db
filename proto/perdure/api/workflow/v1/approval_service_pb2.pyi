from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListApprovalsRequest(_message.Message):
    __slots__ = ("namespace", "status", "workflow_id", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    status: _workflow_pb2.ApprovalStatus
    workflow_id: str
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., status: _Optional[_Union[_workflow_pb2.ApprovalStatus, str]] = ..., workflow_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals", "next_page_token")
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.Approval]
    next_page_token: str
    def __init__(self, approvals: _Optional[_Iterable[_Union[_workflow_pb2.Approval, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetApprovalRequest(_message.Message):
    __slots__ = ("namespace", "approval_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    approval_id: str
    def __init__(self, namespace: _Optional[str] = ..., approval_id: _Optional[str] = ...) -> None: ...

class GetApprovalResponse(_message.Message):
    __slots__ = ("approval",)
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: _workflow_pb2.Approval
    def __init__(self, approval: _Optional[_Union[_workflow_pb2.Approval, _Mapping]] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("namespace", "approval_id", "approve", "details_sha256", "reason", "decided_by")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_SHA256_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    approval_id: str
    approve: bool
    details_sha256: str
    reason: str
    decided_by: str
    def __init__(self, namespace: _Optional[str] = ..., approval_id: _Optional[str] = ..., approve: _Optional[bool] = ..., details_sha256: _Optional[str] = ..., reason: _Optional[str] = ..., decided_by: _Optional[str] = ...) -> None: ...

class DecideApprovalResponse(_message.Message):
    __slots__ = ("approval",)
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    approval: _workflow_pb2.Approval
    def __init__(self, approval: _Optional[_Union[_workflow_pb2.Approval, _Mapping]] = ...) -> None: ...
