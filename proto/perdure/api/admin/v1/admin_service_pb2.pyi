import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from perdure.api.workflow.v1 import workflow_pb2 as _workflow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RoutingPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUTING_POLICY_UNSPECIFIED: _ClassVar[RoutingPolicy]
    ROUTING_POLICY_UNVERSIONED: _ClassVar[RoutingPolicy]
    ROUTING_POLICY_PINNED: _ClassVar[RoutingPolicy]
    ROUTING_POLICY_AUTO_UPGRADE: _ClassVar[RoutingPolicy]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_READER: _ClassVar[Role]
    ROLE_OPERATOR: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]
    ROLE_WORKER: _ClassVar[Role]
ROUTING_POLICY_UNSPECIFIED: RoutingPolicy
ROUTING_POLICY_UNVERSIONED: RoutingPolicy
ROUTING_POLICY_PINNED: RoutingPolicy
ROUTING_POLICY_AUTO_UPGRADE: RoutingPolicy
ROLE_UNSPECIFIED: Role
ROLE_READER: Role
ROLE_OPERATOR: Role
ROLE_ADMIN: Role
ROLE_WORKER: Role

class WorkflowPolicy(_message.Message):
    __slots__ = ("namespace", "workflow_type", "policy", "update_time")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_type: str
    policy: RoutingPolicy
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., workflow_type: _Optional[str] = ..., policy: _Optional[_Union[RoutingPolicy, str]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetWorkflowPolicyRequest(_message.Message):
    __slots__ = ("namespace", "workflow_type", "policy")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_type: str
    policy: RoutingPolicy
    def __init__(self, namespace: _Optional[str] = ..., workflow_type: _Optional[str] = ..., policy: _Optional[_Union[RoutingPolicy, str]] = ...) -> None: ...

class SetWorkflowPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: WorkflowPolicy
    def __init__(self, policy: _Optional[_Union[WorkflowPolicy, _Mapping]] = ...) -> None: ...

class ListWorkflowPoliciesRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListWorkflowPoliciesResponse(_message.Message):
    __slots__ = ("policies",)
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[WorkflowPolicy]
    def __init__(self, policies: _Optional[_Iterable[_Union[WorkflowPolicy, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("identity", "build_id", "task_queue", "workflow_types", "step_types", "capacity", "tasks_in_flight", "connect_time")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPES_FIELD_NUMBER: _ClassVar[int]
    STEP_TYPES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    TASKS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CONNECT_TIME_FIELD_NUMBER: _ClassVar[int]
    identity: str
    build_id: str
    task_queue: str
    workflow_types: _containers.RepeatedScalarFieldContainer[str]
    step_types: _containers.RepeatedScalarFieldContainer[str]
    capacity: int
    tasks_in_flight: int
    connect_time: _timestamp_pb2.Timestamp
    def __init__(self, identity: _Optional[str] = ..., build_id: _Optional[str] = ..., task_queue: _Optional[str] = ..., workflow_types: _Optional[_Iterable[str]] = ..., step_types: _Optional[_Iterable[str]] = ..., capacity: _Optional[int] = ..., tasks_in_flight: _Optional[int] = ..., connect_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("namespace", "task_queue")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    task_queue: str
    def __init__(self, namespace: _Optional[str] = ..., task_queue: _Optional[str] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class BuildInfo(_message.Message):
    __slots__ = ("namespace", "task_queue", "build_id", "first_seen_time", "last_seen_time", "connected_workers", "workflow_types", "open_runs", "pinned_runs", "newest_for")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    BUILD_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPES_FIELD_NUMBER: _ClassVar[int]
    OPEN_RUNS_FIELD_NUMBER: _ClassVar[int]
    PINNED_RUNS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FOR_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    task_queue: str
    build_id: str
    first_seen_time: _timestamp_pb2.Timestamp
    last_seen_time: _timestamp_pb2.Timestamp
    connected_workers: int
    workflow_types: _containers.RepeatedScalarFieldContainer[str]
    open_runs: int
    pinned_runs: int
    newest_for: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., task_queue: _Optional[str] = ..., build_id: _Optional[str] = ..., first_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., connected_workers: _Optional[int] = ..., workflow_types: _Optional[_Iterable[str]] = ..., open_runs: _Optional[int] = ..., pinned_runs: _Optional[int] = ..., newest_for: _Optional[_Iterable[str]] = ...) -> None: ...

class ListBuildsRequest(_message.Message):
    __slots__ = ("namespace", "task_queue")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    task_queue: str
    def __init__(self, namespace: _Optional[str] = ..., task_queue: _Optional[str] = ...) -> None: ...

class ListBuildsResponse(_message.Message):
    __slots__ = ("builds",)
    BUILDS_FIELD_NUMBER: _ClassVar[int]
    builds: _containers.RepeatedCompositeFieldContainer[BuildInfo]
    def __init__(self, builds: _Optional[_Iterable[_Union[BuildInfo, _Mapping]]] = ...) -> None: ...

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

class FlowLimit(_message.Message):
    __slots__ = ("key", "max_runs", "max_steps", "requests_per_second", "units_per_minute", "fairness_weight", "runs_in_flight", "steps_in_flight")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    UNITS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RUNS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    STEPS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    key: str
    max_runs: int
    max_steps: int
    requests_per_second: float
    units_per_minute: int
    fairness_weight: int
    runs_in_flight: int
    steps_in_flight: int
    def __init__(self, key: _Optional[str] = ..., max_runs: _Optional[int] = ..., max_steps: _Optional[int] = ..., requests_per_second: _Optional[float] = ..., units_per_minute: _Optional[int] = ..., fairness_weight: _Optional[int] = ..., runs_in_flight: _Optional[int] = ..., steps_in_flight: _Optional[int] = ...) -> None: ...

class SetFlowLimitRequest(_message.Message):
    __slots__ = ("namespace", "limit")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    limit: FlowLimit
    def __init__(self, namespace: _Optional[str] = ..., limit: _Optional[_Union[FlowLimit, _Mapping]] = ...) -> None: ...

class SetFlowLimitResponse(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: FlowLimit
    def __init__(self, limit: _Optional[_Union[FlowLimit, _Mapping]] = ...) -> None: ...

class DeleteFlowLimitRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class DeleteFlowLimitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListFlowLimitsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListFlowLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[FlowLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[FlowLimit, _Mapping]]] = ...) -> None: ...

class BudgetInfo(_message.Message):
    __slots__ = ("key", "workflow_id", "limit", "period", "period_start", "reserved", "spent", "refusals")
    KEY_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FIELD_NUMBER: _ClassVar[int]
    SPENT_FIELD_NUMBER: _ClassVar[int]
    REFUSALS_FIELD_NUMBER: _ClassVar[int]
    key: str
    workflow_id: str
    limit: _flow_pb2.Budget
    period: _flow_pb2.BudgetPeriod
    period_start: _timestamp_pb2.Timestamp
    reserved: _flow_pb2.Usage
    spent: _flow_pb2.Usage
    refusals: int
    def __init__(self, key: _Optional[str] = ..., workflow_id: _Optional[str] = ..., limit: _Optional[_Union[_flow_pb2.Budget, _Mapping]] = ..., period: _Optional[_Union[_flow_pb2.BudgetPeriod, str]] = ..., period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reserved: _Optional[_Union[_flow_pb2.Usage, _Mapping]] = ..., spent: _Optional[_Union[_flow_pb2.Usage, _Mapping]] = ..., refusals: _Optional[int] = ...) -> None: ...

class SetBudgetRequest(_message.Message):
    __slots__ = ("namespace", "budget")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    budget: BudgetInfo
    def __init__(self, namespace: _Optional[str] = ..., budget: _Optional[_Union[BudgetInfo, _Mapping]] = ...) -> None: ...

class SetBudgetResponse(_message.Message):
    __slots__ = ("budget",)
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: BudgetInfo
    def __init__(self, budget: _Optional[_Union[BudgetInfo, _Mapping]] = ...) -> None: ...

class DeleteBudgetRequest(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class DeleteBudgetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListBudgetsRequest(_message.Message):
    __slots__ = ("namespace", "workflow_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_id: str
    def __init__(self, namespace: _Optional[str] = ..., workflow_id: _Optional[str] = ...) -> None: ...

class ListBudgetsResponse(_message.Message):
    __slots__ = ("budgets",)
    BUDGETS_FIELD_NUMBER: _ClassVar[int]
    budgets: _containers.RepeatedCompositeFieldContainer[BudgetInfo]
    def __init__(self, budgets: _Optional[_Iterable[_Union[BudgetInfo, _Mapping]]] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("namespace", "workflow_id", "workflow_type", "task_queue", "reason")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_id: str
    workflow_type: str
    task_queue: str
    reason: str
    def __init__(self, namespace: _Optional[str] = ..., workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., task_queue: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("pause", "changed")
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    pause: _workflow_pb2.Pause
    changed: bool
    def __init__(self, pause: _Optional[_Union[_workflow_pb2.Pause, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class UnpauseRequest(_message.Message):
    __slots__ = ("namespace", "workflow_id", "workflow_type", "task_queue")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_id: str
    workflow_type: str
    task_queue: str
    def __init__(self, namespace: _Optional[str] = ..., workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., task_queue: _Optional[str] = ...) -> None: ...

class UnpauseResponse(_message.Message):
    __slots__ = ("changed",)
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    def __init__(self, changed: _Optional[bool] = ...) -> None: ...

class ListPausesRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ListPausesResponse(_message.Message):
    __slots__ = ("pauses",)
    PAUSES_FIELD_NUMBER: _ClassVar[int]
    pauses: _containers.RepeatedCompositeFieldContainer[_workflow_pb2.Pause]
    def __init__(self, pauses: _Optional[_Iterable[_Union[_workflow_pb2.Pause, _Mapping]]] = ...) -> None: ...

class GetStorageRequest(_message.Message):
    __slots__ = ("namespace", "top")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    top: int
    def __init__(self, namespace: _Optional[str] = ..., top: _Optional[int] = ...) -> None: ...

class StorageNamespace(_message.Message):
    __slots__ = ("namespace", "runs", "open_runs", "events", "history_bytes", "steps")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    OPEN_RUNS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    runs: int
    open_runs: int
    events: int
    history_bytes: int
    steps: int
    def __init__(self, namespace: _Optional[str] = ..., runs: _Optional[int] = ..., open_runs: _Optional[int] = ..., events: _Optional[int] = ..., history_bytes: _Optional[int] = ..., steps: _Optional[int] = ...) -> None: ...

class StorageRun(_message.Message):
    __slots__ = ("workflow_id", "run_id", "workflow_type", "status", "event_count", "history_bytes")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    run_id: str
    workflow_type: str
    status: _workflow_pb2.WorkflowStatus
    event_count: int
    history_bytes: int
    def __init__(self, workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., status: _Optional[_Union[_workflow_pb2.WorkflowStatus, str]] = ..., event_count: _Optional[int] = ..., history_bytes: _Optional[int] = ...) -> None: ...

class StorageTable(_message.Message):
    __slots__ = ("name", "table_bytes", "index_bytes", "live_rows", "dead_rows", "dead_share", "dead_share_source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    INDEX_BYTES_FIELD_NUMBER: _ClassVar[int]
    LIVE_ROWS_FIELD_NUMBER: _ClassVar[int]
    DEAD_ROWS_FIELD_NUMBER: _ClassVar[int]
    DEAD_SHARE_FIELD_NUMBER: _ClassVar[int]
    DEAD_SHARE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    table_bytes: int
    index_bytes: int
    live_rows: int
    dead_rows: int
    dead_share: float
    dead_share_source: str
    def __init__(self, name: _Optional[str] = ..., table_bytes: _Optional[int] = ..., index_bytes: _Optional[int] = ..., live_rows: _Optional[int] = ..., dead_rows: _Optional[int] = ..., dead_share: _Optional[float] = ..., dead_share_source: _Optional[str] = ...) -> None: ...

class StorageWriteRate(_message.Message):
    __slots__ = ("window_seconds", "events_per_second", "bytes_per_second")
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    window_seconds: float
    events_per_second: float
    bytes_per_second: float
    def __init__(self, window_seconds: _Optional[float] = ..., events_per_second: _Optional[float] = ..., bytes_per_second: _Optional[float] = ...) -> None: ...

class GetStorageResponse(_message.Message):
    __slots__ = ("namespace", "largest_runs", "write_rate", "database_bytes", "tables")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LARGEST_RUNS_FIELD_NUMBER: _ClassVar[int]
    WRITE_RATE_FIELD_NUMBER: _ClassVar[int]
    DATABASE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    namespace: StorageNamespace
    largest_runs: _containers.RepeatedCompositeFieldContainer[StorageRun]
    write_rate: StorageWriteRate
    database_bytes: int
    tables: _containers.RepeatedCompositeFieldContainer[StorageTable]
    def __init__(self, namespace: _Optional[_Union[StorageNamespace, _Mapping]] = ..., largest_runs: _Optional[_Iterable[_Union[StorageRun, _Mapping]]] = ..., write_rate: _Optional[_Union[StorageWriteRate, _Mapping]] = ..., database_bytes: _Optional[int] = ..., tables: _Optional[_Iterable[_Union[StorageTable, _Mapping]]] = ...) -> None: ...

class ExportWorkflowRequest(_message.Message):
    __slots__ = ("namespace", "workflow_id", "run_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workflow_id: str
    run_id: str
    def __init__(self, namespace: _Optional[str] = ..., workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class ExportWorkflowResponse(_message.Message):
    __slots__ = ("archive", "run_id", "event_count")
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    archive: bytes
    run_id: str
    event_count: int
    def __init__(self, archive: _Optional[bytes] = ..., run_id: _Optional[str] = ..., event_count: _Optional[int] = ...) -> None: ...

class ImportWorkflowRequest(_message.Message):
    __slots__ = ("namespace", "archive")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    archive: bytes
    def __init__(self, namespace: _Optional[str] = ..., archive: _Optional[bytes] = ...) -> None: ...

class ImportWorkflowResponse(_message.Message):
    __slots__ = ("workflow_id", "run_id", "event_count", "earlier_run")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    EARLIER_RUN_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    run_id: str
    event_count: int
    earlier_run: bool
    def __init__(self, workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., event_count: _Optional[int] = ..., earlier_run: _Optional[bool] = ...) -> None: ...

class Retention(_message.Message):
    __slots__ = ("namespace", "seconds", "forever", "is_default")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    FOREVER_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    seconds: float
    forever: bool
    is_default: bool
    def __init__(self, namespace: _Optional[str] = ..., seconds: _Optional[float] = ..., forever: _Optional[bool] = ..., is_default: _Optional[bool] = ...) -> None: ...

class GetRetentionRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class GetRetentionResponse(_message.Message):
    __slots__ = ("retention",)
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    retention: Retention
    def __init__(self, retention: _Optional[_Union[Retention, _Mapping]] = ...) -> None: ...

class SetRetentionRequest(_message.Message):
    __slots__ = ("namespace", "seconds", "forever", "use_default")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    FOREVER_FIELD_NUMBER: _ClassVar[int]
    USE_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    seconds: float
    forever: bool
    use_default: bool
    def __init__(self, namespace: _Optional[str] = ..., seconds: _Optional[float] = ..., forever: _Optional[bool] = ..., use_default: _Optional[bool] = ...) -> None: ...

class SetRetentionResponse(_message.Message):
    __slots__ = ("retention",)
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    retention: Retention
    def __init__(self, retention: _Optional[_Union[Retention, _Mapping]] = ...) -> None: ...
