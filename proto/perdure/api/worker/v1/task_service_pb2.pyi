import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RenewLeasesRequest(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class RenewLeasesResponse(_message.Message):
    __slots__ = ("renewed", "now")
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    renewed: _containers.RepeatedCompositeFieldContainer[RenewedLease]
    now: _timestamp_pb2.Timestamp
    def __init__(self, renewed: _Optional[_Iterable[_Union[RenewedLease, _Mapping]]] = ..., now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RenewedLease(_message.Message):
    __slots__ = ("lease", "expire_time")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("hello", "heartbeat", "task_done", "drain")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    TASK_DONE_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    heartbeat: Heartbeat
    task_done: TaskDone
    drain: Drain
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., task_done: _Optional[_Union[TaskDone, _Mapping]] = ..., drain: _Optional[_Union[Drain, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("welcome", "task", "lease_revoked", "reconnect")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    LEASE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    RECONNECT_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    task: Task
    lease_revoked: LeaseRevoked
    reconnect: Reconnect
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., lease_revoked: _Optional[_Union[LeaseRevoked, _Mapping]] = ..., reconnect: _Optional[_Union[Reconnect, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("identity", "task_queue", "workflow_types", "capacity", "leases", "timer_lookahead", "step_types", "namespace", "sticky_id", "build_id")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    TIMER_LOOKAHEAD_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STICKY_ID_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    identity: str
    task_queue: str
    workflow_types: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    timer_lookahead: _duration_pb2.Duration
    step_types: _containers.RepeatedScalarFieldContainer[str]
    namespace: str
    sticky_id: str
    build_id: str
    def __init__(self, identity: _Optional[str] = ..., task_queue: _Optional[str] = ..., workflow_types: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ..., leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ..., timer_lookahead: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., step_types: _Optional[_Iterable[str]] = ..., namespace: _Optional[str] = ..., sticky_id: _Optional[str] = ..., build_id: _Optional[str] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("session_id", "lease_ttl", "heartbeat_interval")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    lease_ttl: _duration_pb2.Duration
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, session_id: _Optional[str] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("workflow_id", "fence", "step_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    fence: int
    step_id: str
    def __init__(self, workflow_id: _Optional[str] = ..., fence: _Optional[int] = ..., step_id: _Optional[str] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class TaskDone(_message.Message):
    __slots__ = ("lease", "unfinished", "sticky", "usage")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    UNFINISHED_FIELD_NUMBER: _ClassVar[int]
    STICKY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    unfinished: bool
    sticky: bool
    usage: _flow_pb2.Usage
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., unfinished: _Optional[bool] = ..., sticky: _Optional[bool] = ..., usage: _Optional[_Union[_flow_pb2.Usage, _Mapping]] = ...) -> None: ...

class Drain(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Task(_message.Message):
    __slots__ = ("workflow_id", "workflow_type", "fence", "trace_context", "step_id", "step_type", "lease_expire_time", "lease_proof", "budget_exceeded")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LEASE_PROOF_FIELD_NUMBER: _ClassVar[int]
    BUDGET_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    workflow_type: str
    fence: int
    trace_context: _containers.ScalarMap[str, str]
    step_id: str
    step_type: str
    lease_expire_time: _timestamp_pb2.Timestamp
    lease_proof: bytes
    budget_exceeded: str
    def __init__(self, workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., fence: _Optional[int] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., step_id: _Optional[str] = ..., step_type: _Optional[str] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lease_proof: _Optional[bytes] = ..., budget_exceeded: _Optional[str] = ...) -> None: ...

class Reconnect(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class LeaseRevoked(_message.Message):
    __slots__ = ("lease", "reason")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    reason: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...
