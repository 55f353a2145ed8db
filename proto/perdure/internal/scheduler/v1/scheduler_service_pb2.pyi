import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.admin.v1 import admin_service_pb2 as _admin_service_pb2
from perdure.api.common.v1 import flow_pb2 as _flow_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskRequest(_message.Message):
    __slots__ = ("workflow_id", "workflow_type", "task_queue", "run_time", "trace_context", "wake_reason", "step_id", "fence_floor", "closed", "run_number", "flow")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    WAKE_REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    RUN_NUMBER_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    workflow_type: str
    task_queue: str
    run_time: _timestamp_pb2.Timestamp
    trace_context: _containers.ScalarMap[str, str]
    wake_reason: str
    step_id: str
    fence_floor: int
    closed: bool
    run_number: int
    flow: TaskFlow
    def __init__(self, workflow_id: _Optional[str] = ..., workflow_type: _Optional[str] = ..., task_queue: _Optional[str] = ..., run_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., wake_reason: _Optional[str] = ..., step_id: _Optional[str] = ..., fence_floor: _Optional[int] = ..., closed: _Optional[bool] = ..., run_number: _Optional[int] = ..., flow: _Optional[_Union[TaskFlow, _Mapping]] = ...) -> None: ...

class TaskFlow(_message.Message):
    __slots__ = ("keys", "budget_keys", "priority", "fairness_key", "estimate", "run_budget", "on_budget_exceeded")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    RUN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ON_BUDGET_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    budget_keys: _containers.RepeatedScalarFieldContainer[str]
    priority: int
    fairness_key: str
    estimate: _flow_pb2.Usage
    run_budget: _flow_pb2.Budget
    on_budget_exceeded: _flow_pb2.BudgetExceededAction
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., budget_keys: _Optional[_Iterable[str]] = ..., priority: _Optional[int] = ..., fairness_key: _Optional[str] = ..., estimate: _Optional[_Union[_flow_pb2.Usage, _Mapping]] = ..., run_budget: _Optional[_Union[_flow_pb2.Budget, _Mapping]] = ..., on_budget_exceeded: _Optional[_Union[_flow_pb2.BudgetExceededAction, str]] = ...) -> None: ...

class EnqueueTasksRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskRequest]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskRequest, _Mapping]]] = ...) -> None: ...

class EnqueueTasksResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeTaskQueueRequest(_message.Message):
    __slots__ = ("task_queue",)
    TASK_QUEUE_FIELD_NUMBER: _ClassVar[int]
    task_queue: str
    def __init__(self, task_queue: _Optional[str] = ...) -> None: ...

class DescribeTaskQueueResponse(_message.Message):
    __slots__ = ("workflow_types", "connected_workers")
    WORKFLOW_TYPES_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    workflow_types: _containers.RepeatedScalarFieldContainer[str]
    connected_workers: int
    def __init__(self, workflow_types: _Optional[_Iterable[str]] = ..., connected_workers: _Optional[int] = ...) -> None: ...

class CheckLeaseRequest(_message.Message):
    __slots__ = ("workflow_id", "step_id", "fence", "key_id")
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    workflow_id: str
    step_id: str
    fence: int
    key_id: str
    def __init__(self, workflow_id: _Optional[str] = ..., step_id: _Optional[str] = ..., fence: _Optional[int] = ..., key_id: _Optional[str] = ...) -> None: ...

class CheckLeaseResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: bool
    def __init__(self, held: _Optional[bool] = ...) -> None: ...

class FindIdleRunsRequest(_message.Message):
    __slots__ = ("workflow_ids",)
    WORKFLOW_IDS_FIELD_NUMBER: _ClassVar[int]
    workflow_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workflow_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FindIdleRunsResponse(_message.Message):
    __slots__ = ("workflow_ids",)
    WORKFLOW_IDS_FIELD_NUMBER: _ClassVar[int]
    workflow_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workflow_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SetWorkflowPolicyRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.SetWorkflowPolicyRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.SetWorkflowPolicyRequest, _Mapping]] = ...) -> None: ...

class SetWorkflowPolicyResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.SetWorkflowPolicyResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.SetWorkflowPolicyResponse, _Mapping]] = ...) -> None: ...

class ListWorkflowPoliciesRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListWorkflowPoliciesRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListWorkflowPoliciesRequest, _Mapping]] = ...) -> None: ...

class ListWorkflowPoliciesResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListWorkflowPoliciesResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListWorkflowPoliciesResponse, _Mapping]] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListWorkersRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListWorkersRequest, _Mapping]] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListWorkersResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListWorkersResponse, _Mapping]] = ...) -> None: ...

class ListBuildsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListBuildsRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListBuildsRequest, _Mapping]] = ...) -> None: ...

class ListBuildsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListBuildsResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListBuildsResponse, _Mapping]] = ...) -> None: ...

class SetFlowLimitRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.SetFlowLimitRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.SetFlowLimitRequest, _Mapping]] = ...) -> None: ...

class SetFlowLimitResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.SetFlowLimitResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.SetFlowLimitResponse, _Mapping]] = ...) -> None: ...

class DeleteFlowLimitRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.DeleteFlowLimitRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.DeleteFlowLimitRequest, _Mapping]] = ...) -> None: ...

class DeleteFlowLimitResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.DeleteFlowLimitResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.DeleteFlowLimitResponse, _Mapping]] = ...) -> None: ...

class ListFlowLimitsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListFlowLimitsRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListFlowLimitsRequest, _Mapping]] = ...) -> None: ...

class ListFlowLimitsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListFlowLimitsResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListFlowLimitsResponse, _Mapping]] = ...) -> None: ...

class SetBudgetRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.SetBudgetRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.SetBudgetRequest, _Mapping]] = ...) -> None: ...

class SetBudgetResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.SetBudgetResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.SetBudgetResponse, _Mapping]] = ...) -> None: ...

class DeleteBudgetRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.DeleteBudgetRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.DeleteBudgetRequest, _Mapping]] = ...) -> None: ...

class DeleteBudgetResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.DeleteBudgetResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.DeleteBudgetResponse, _Mapping]] = ...) -> None: ...

class ListBudgetsRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListBudgetsRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListBudgetsRequest, _Mapping]] = ...) -> None: ...

class ListBudgetsResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListBudgetsResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListBudgetsResponse, _Mapping]] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("request", "paused_by")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.PauseRequest
    paused_by: str
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.PauseRequest, _Mapping]] = ..., paused_by: _Optional[str] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.PauseResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.PauseResponse, _Mapping]] = ...) -> None: ...

class UnpauseRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.UnpauseRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.UnpauseRequest, _Mapping]] = ...) -> None: ...

class UnpauseResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.UnpauseResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.UnpauseResponse, _Mapping]] = ...) -> None: ...

class ListPausesRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _admin_service_pb2.ListPausesRequest
    def __init__(self, request: _Optional[_Union[_admin_service_pb2.ListPausesRequest, _Mapping]] = ...) -> None: ...

class ListPausesResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _admin_service_pb2.ListPausesResponse
    def __init__(self, response: _Optional[_Union[_admin_service_pb2.ListPausesResponse, _Mapping]] = ...) -> None: ...
