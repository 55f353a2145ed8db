"""The JSON routes: each one a WorkflowService (or AdminService) method, called on the gateway's
own gRPC port,
so that validation, authentication, rate limits and error reasons are those of gRPC."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admin_grpc
from perdure.api.workflow.v1 import approval_service_pb2 as approvals_api
from perdure.api.workflow.v1 import approval_service_pb2_grpc as approvals_grpc
from perdure.api.workflow.v1 import schedule_service_pb2 as schedules
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as schedules_grpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.common.errors import ApiError
from perdure.common.reasons import Reason
from perdure.common.service_identity import CLIENT_ADDRESS_HEADER
from perdure.gateway.http.admission import body_cap, read_body, refuse_declared_size, require_key
from perdure.gateway.http.convert import decode_body, dumps, from_json, invalid_json, to_json

CALL_TIMEOUT_SECONDS = 30.0
_PATH_FIELD = re.compile(r"{(\w+)}")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    """One JSON route and the gRPC method it calls."""

    method: str  # GET reads its request from the query, POST from a JSON body
    path: str  # with {field} segments, which fill those fields of the request
    rpc: str
    request: type[Message]
    response: type[Message]
    summary: str
    operation_id: str = ""  # the rpc's name unless another route calls the same rpc
    payloads: int = 0  # how many JSON payloads (input, payload) its body may carry
    admin: bool = False  # an AdminService method
    schedules: bool = False  # a ScheduleService method
    approvals: bool = False  # an ApprovalService method

    @property
    def path_fields(self) -> list[str]:
        """The request fields the path names."""
        return _PATH_FIELD.findall(self.path)

    @property
    def name(self) -> str:
        """The OpenAPI operationId."""
        return self.operation_id or self.rpc

    @property
    def body_cap(self) -> int:
        """The most bytes its body may have."""
        return body_cap(self.payloads)


RUN = "/v1/workflows/{workflow_id}"
APPROVAL = "/v1/approvals/{approval_id}"
SCHEDULE = "/v1/schedules/{schedule_id}"
FORK_PAYLOADS = 4  # the body of a fork holds its overrides' payloads, up to this many at most
ROUTES = (
    Route(
        "POST",
        "/v1/workflows",
        "StartWorkflow",
        api.StartWorkflowRequest,
        api.StartWorkflowResponse,
        "Start a run (idempotent by workflow_id)",
        payloads=1,
    ),
    Route(
        "GET",
        "/v1/workflows",
        "ListWorkflows",
        api.ListWorkflowsRequest,
        api.ListWorkflowsResponse,
        "List runs, newest first",
    ),
    Route(
        "GET",
        RUN,
        "DescribeWorkflow",
        api.DescribeWorkflowRequest,
        api.DescribeWorkflowResponse,
        "A run with its steps, pending signals and published state",
    ),
    Route(
        "GET",
        f"{RUN}/history",
        "GetWorkflowHistory",
        api.GetWorkflowHistoryRequest,
        api.GetWorkflowHistoryResponse,
        "A page of the run's journal",
    ),
    Route(
        "GET",
        f"{RUN}/state/{{key}}",
        "QueryWorkflow",
        api.QueryWorkflowRequest,
        api.QueryWorkflowResponse,
        "One value the run published",
    ),
    Route(
        "POST",
        f"{RUN}/signals",
        "SignalWorkflow",
        api.SignalWorkflowRequest,
        api.SignalWorkflowResponse,
        "Send the run a signal (once per signal_id)",
        payloads=1,
    ),
    Route(
        "POST",
        f"{RUN}/cancel",
        "CancelWorkflow",
        api.CancelWorkflowRequest,
        api.CancelWorkflowResponse,
        "Ask the run to cancel (its code runs its compensations)",
    ),
    Route(
        "POST",
        f"{RUN}/terminate",
        "TerminateWorkflow",
        api.TerminateWorkflowRequest,
        api.TerminateWorkflowResponse,
        "End the run at once, running no more of its code",
    ),
    Route(
        "POST",
        f"{RUN}/resume",
        "ResumeWorkflow",
        api.ResumeWorkflowRequest,
        api.ResumeWorkflowResponse,
        "Open a parked run again: a worker replays it with the code it runs now",
    ),
    Route(
        "POST",
        f"{RUN}/reset",
        "ResetWorkflow",
        api.ResetWorkflowRequest,
        api.ResetWorkflowResponse,
        "Start the id's next run from a copy of a run's journal before a step",
    ),
    Route(
        "POST",
        f"{RUN}/fork",
        "ForkWorkflow",
        api.ForkWorkflowRequest,
        api.ForkWorkflowResponse,
        "Start a run under a new id from a copy of a run's journal, some step outputs replaced",
        payloads=FORK_PAYLOADS,
    ),
    Route(
        "POST",
        "/v1/signal-with-start",
        "SignalWithStartWorkflow",
        api.SignalWithStartWorkflowRequest,
        api.SignalWithStartWorkflowResponse,
        "Signal a run, starting it first if it does not exist",
        payloads=2,
    ),
    Route(
        "GET",
        "/v1/workers",
        "ListWorkers",
        admin.ListWorkersRequest,
        admin.ListWorkersResponse,
        "The worker sessions connected now, with their builds",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/builds",
        "ListBuilds",
        admin.ListBuildsRequest,
        admin.ListBuildsResponse,
        "The builds seen on each task queue, with their workers and open runs",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/workflow-policies",
        "ListWorkflowPolicies",
        admin.ListWorkflowPoliciesRequest,
        admin.ListWorkflowPoliciesResponse,
        "The workflow types' routing policies (a type not listed is unversioned)",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/workflow-policies",
        "SetWorkflowPolicy",
        admin.SetWorkflowPolicyRequest,
        admin.SetWorkflowPolicyResponse,
        "Set a workflow type's routing policy: pinned, auto-upgrade or unversioned",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/flow-limits",
        "ListFlowLimits",
        admin.ListFlowLimitsRequest,
        admin.ListFlowLimitsResponse,
        "The keys' limits, with the runs and steps in flight under each",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/flow-limits",
        "SetFlowLimit",
        admin.SetFlowLimitRequest,
        admin.SetFlowLimitResponse,
        "Set a key's limits: runs or steps in flight, requests per second, units per minute",
        admin=True,
    ),
    Route(
        "DELETE",
        "/v1/flow-limits/{key}",
        "DeleteFlowLimit",
        admin.DeleteFlowLimitRequest,
        admin.DeleteFlowLimitResponse,
        "Remove a key's limits",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/budgets",
        "ListBudgets",
        admin.ListBudgetsRequest,
        admin.ListBudgetsResponse,
        "Budgets with their current period's usage (or one run's own budget)",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/budgets",
        "SetBudget",
        admin.SetBudgetRequest,
        admin.SetBudgetResponse,
        "Set a budget on a key, or on the namespace (key empty), per period",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/budgets/delete",
        "DeleteBudget",
        admin.DeleteBudgetRequest,
        admin.DeleteBudgetResponse,
        "Remove a key's budget, or the namespace's (key empty)",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/storage",
        "GetStorage",
        admin.GetStorageRequest,
        admin.GetStorageResponse,
        "What the database holds: the namespace's runs, events and journal bytes, its largest "
        "runs, the journal's growth, and the database's and each table's size",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/pauses",
        "ListPauses",
        admin.ListPausesRequest,
        admin.ListPausesResponse,
        "The pauses in force: workflow ids, workflow types and task queues granted to no worker",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/pauses",
        "Pause",
        admin.PauseRequest,
        admin.PauseResponse,
        "Pause one workflow id, workflow type or task queue: nothing more of it is granted",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/pauses/unpause",
        "Unpause",
        admin.UnpauseRequest,
        admin.UnpauseResponse,
        "Lift a pause: what it held is granted again at once",
        admin=True,
    ),
    Route(
        "GET",
        "/v1/retention",
        "GetRetention",
        admin.GetRetentionRequest,
        admin.GetRetentionResponse,
        "How long the namespace's closed runs are kept",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/retention",
        "SetRetention",
        admin.SetRetentionRequest,
        admin.SetRetentionResponse,
        "Set how long the namespace's closed runs are kept: seconds, forever or the default",
        admin=True,
    ),
    Route(
        "POST",
        "/v1/schedules",
        "CreateSchedule",
        schedules.CreateScheduleRequest,
        schedules.CreateScheduleResponse,
        "Create a schedule: a cron or an interval that starts runs, one per slot",
        payloads=1,
        schedules=True,
    ),
    Route(
        "GET",
        "/v1/schedules",
        "ListSchedules",
        schedules.ListSchedulesRequest,
        schedules.ListSchedulesResponse,
        "List the schedules, oldest first",
        schedules=True,
    ),
    Route(
        "GET",
        SCHEDULE,
        "DescribeSchedule",
        schedules.DescribeScheduleRequest,
        schedules.DescribeScheduleResponse,
        "A schedule with its next fire times, recent runs and counts",
        schedules=True,
    ),
    Route(
        "POST",
        f"{SCHEDULE}/pause",
        "PauseSchedule",
        schedules.PauseScheduleRequest,
        schedules.PauseScheduleResponse,
        "Pause a schedule: its slots are skipped until it is unpaused",
        schedules=True,
    ),
    Route(
        "POST",
        f"{SCHEDULE}/unpause",
        "UnpauseSchedule",
        schedules.UnpauseScheduleRequest,
        schedules.UnpauseScheduleResponse,
        "Unpause a schedule: its next slot starts a run",
        schedules=True,
    ),
    Route(
        "POST",
        f"{SCHEDULE}/trigger",
        "TriggerSchedule",
        schedules.TriggerScheduleRequest,
        schedules.TriggerScheduleResponse,
        "Start a run of the schedule's action now, whatever its overlap policy",
        schedules=True,
    ),
    Route(
        "POST",
        f"{SCHEDULE}/delete",
        "DeleteSchedule",
        schedules.DeleteScheduleRequest,
        schedules.DeleteScheduleResponse,
        "Delete a schedule (the runs it started stay)",
        schedules=True,
    ),
    Route(
        "GET",
        "/v1/approvals",
        "ListApprovals",
        approvals_api.ListApprovalsRequest,
        approvals_api.ListApprovalsResponse,
        "List approvals across runs, newest first (by status, by workflow id)",
        approvals=True,
    ),
    Route(
        "GET",
        APPROVAL,
        "GetApproval",
        approvals_api.GetApprovalRequest,
        approvals_api.GetApprovalResponse,
        "One approval, with its details and their SHA-256",
        approvals=True,
    ),
    Route(
        "POST",
        f"{APPROVAL}/decide",
        "DecideApproval",
        approvals_api.DecideApprovalRequest,
        approvals_api.DecideApprovalResponse,
        "Approve or reject an approval, once, naming the details' SHA-256 the decider saw",
        approvals=True,
    ),
)


def forwarded(request: web.Request) -> tuple[tuple[str, str], ...]:
    """The metadata a call carries on: the caller's API key, and its address (the gateway's
    guard counts failed keys per client, which it believes from the gateway's own HTTP server
    only: the channel carries the service's credential)."""
    client = ((CLIENT_ADDRESS_HEADER, request.remote or "unknown"),)
    authorization = request.headers.get("Authorization")
    if not authorization:
        return client
    if not (authorization.isascii() and authorization.isprintable()):
        raise ApiError(
            grpc.StatusCode.UNAUTHENTICATED,
            Reason.API_KEY_INVALID,
            "the Authorization header must be 'Bearer <API key>', in printable ASCII",
        )
    return (("authorization", authorization), *client)


def route_handler(
    route: Route,
    stub: api_grpc.WorkflowServiceStub
    | admin_grpc.AdminServiceStub
    | schedules_grpc.ScheduleServiceStub
    | approvals_grpc.ApprovalServiceStub,
) -> Handler:
    """The aiohttp handler of a route."""
    call = getattr(stub, route.rpc)

    async def handle(request: web.Request) -> web.StreamResponse:
        metadata = forwarded(request)
        body = b""
        if route.method == "POST":
            refuse_declared_size(request, route.body_cap)
            await require_key(request, call, route.request(), metadata)
            body = await read_body(request, route.body_cap)
        # Converting a large body takes a while: in a thread, the event loop goes on serving.
        message = await asyncio.to_thread(request_message, route, request, body)
        answer = await call(message, metadata=metadata, timeout=CALL_TIMEOUT_SECONDS)
        return web.json_response(to_json(answer), dumps=dumps)

    return handle


def request_message(route: Route, request: web.Request, body: bytes) -> Message:
    """The gRPC request of an HTTP request: its body or query, its path, its namespace."""
    if route.method == "POST":
        fields = decode_body(body)
        for name in route.path_fields:
            if isinstance(fields, dict) and name in fields:
                raise invalid_json(f"{name} is given by the path, not the body")
        message = from_json(fields, route.request())
        if "namespace" in request.query:
            if "namespace" not in message.DESCRIPTOR.fields_by_name:
                raise invalid_json("this route takes the namespace in its body")
            message.namespace = request.query["namespace"]  # type: ignore[attr-defined]
    else:
        message = from_json(query_fields(request, route.request()), route.request())
    for name in route.path_fields:
        setattr(message, name, request.match_info[name])
    return message


def query_fields(request: web.Request, message: Message) -> dict[str, Any]:
    """The query parameters as JSON fields of a request message: each names a scalar field
    of it (not one the path gives), once."""
    fields: dict[str, Any] = {}
    for name in request.query:
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None or name in request.match_info or field.message_type is not None:
            raise invalid_json(f"unknown query parameter {name!r}")
        values = request.query.getall(name)
        if len(values) > 1:
            raise invalid_json(f"query parameter {name!r} is given {len(values)} times")
        fields[name] = _query_value(field, values[0])
    return fields


def _query_value(field: Any, value: str) -> Any:
    """A query parameter's value as its field's JSON: a bool is `true` or `false` (JSON takes
    it unquoted); an enum by its name, in any case, with or without its prefix (`completed`,
    as the CLI says, or WORKFLOW_STATUS_COMPLETED); the rest as the text it is (JSON takes
    numbers quoted)."""
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum_name(field, value)
    if field.type != FieldDescriptor.TYPE_BOOL:
        return value
    if value not in ("true", "false"):
        raise invalid_json(f"query parameter {field.name!r} must be true or false, not {value!r}")
    return value == "true"


def _enum_name(field: Any, value: str) -> str:
    """The enum value's full name a query parameter names (see _query_value)."""
    # Every enum's zero value is PREFIX_UNSPECIFIED (buf lint): its prefix is the enum's.
    prefix = str(field.enum_type.values_by_number[0].name).removesuffix("UNSPECIFIED")
    names = [str(v.name) for v in field.enum_type.values if v.number != 0]
    for name in (str(field.enum_type.values_by_number[0].name), *names):
        if value.upper() in (name, name.removeprefix(prefix)):
            return name
    accepted = ", ".join(name.removeprefix(prefix).lower() for name in names)
    raise invalid_json(f"query parameter {field.name!r} must be one of {accepted}, not {value!r}")
