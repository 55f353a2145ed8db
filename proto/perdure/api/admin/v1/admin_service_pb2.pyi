import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_READER: _ClassVar[Role]
    ROLE_OPERATOR: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]
    ROLE_WORKER: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
ROLE_READER: Role
ROLE_OPERATOR: Role
ROLE_ADMIN: Role
ROLE_WORKER: Role

class ApiKey(_message.Message):
    __slots__ = ("key_id", "namespace", "role", "task_queues", "name", "create_time", "revoke_time", "created_by")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    namespace: str
    role: Role
    task_queues: _containers.RepeatedScalarFieldContainer[str]
    name: str
    create_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    created_by: str
    def __init__(self, key_id: _Optional[str] = ..., namespace: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., task_queues: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("role", "task_queues", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: Role
    task_queues: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., task_queues: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("key", "token")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    token: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: bool
    def __init__(self, revoked: _Optional[bool] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("include_revoked",)
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    include_revoked: bool
    def __init__(self, include_revoked: _Optional[bool] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("id", "time", "key_id", "namespace", "action", "target", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: int
    time: _timestamp_pb2.Timestamp
    key_id: str
    namespace: str
    action: str
    target: str
    details: _struct_pb2.Struct
    def __init__(self, id: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., key_id: _Optional[str] = ..., namespace: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
