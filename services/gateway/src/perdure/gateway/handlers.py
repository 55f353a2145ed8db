"""The public WorkflowService and AdminService: check the caller's namespace and rate, validate,
then ask history (and the scheduler for types) of the run's cell (cells.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message
from opentelemetry import trace

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.common import errors, namespaces
from perdure.common.auth import RememberedKeys, acting_namespace, current_principal
from perdure.common.flow import check_run_flow
from perdure.common.limits import KeyedLimits
from perdure.common.payload import normalized, validate_payload
from perdure.common.reasons import Reason
from perdure.gateway import merge, validate
from perdure.gateway.builds import BuildsAdmin
from perdure.gateway.cells import RUN, START_KEY, Cell, EveryCell, Router
from perdure.gateway.flow_admin import FlowAdmin, with_budget_use
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.gateway.live import LiveCalls
from perdure.gateway.pauses import PausesAdmin, holding, pauses_for_describe
from perdure.gateway.retention import RetentionAdmin
from perdure.gateway.storage import StorageAdmin
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc
from perdure.telemetry.spans import Tracer

tracer = Tracer("perdure.gateway")
Context = grpc.aio.ServicerContext[Any, Any]
DOWNSTREAM_TIMEOUT = 30.0
Answer = TypeVar("Answer", bound=Message)
Signal = TypeVar("Signal", api.SignalWorkflowRequest, api.SignalWithStartWorkflowRequest)


class Callers:
    """Where a call acts and whether its caller may make it now: the API key's namespace
    (a request naming another is refused), or the one named when authentication is off; one
    rate limit per key (per peer address without keys)."""

    def __init__(self, limits: KeyedLimits) -> None:
        self._limits = limits

    def admit(self, context: Context, requested: str) -> str:
        """The namespace this call acts in, once it is counted against its rate limit."""
        principal = current_principal.get()
        self._limits.take(context.peer() if principal is None else principal.key_id)
        return acting_namespace(requested)


class WorkflowServicer(LiveCalls, apigrpc.WorkflowServiceServicer):
    """Validates every request and answers bad input before anything is written."""

    def __init__(self, router: Router, callers: Callers) -> None:
        self._router = router
        self._callers = callers
        # The scheduler never forgets a declared type, so a yes is remembered: a start of a
        # known type costs no call to the scheduler. By cell: each has its scheduler.
        self._registered: set[tuple[str, str, str]] = set()

    @errors.unary
    async def StartWorkflow(
        self, request: api.StartWorkflowRequest, context: Context
    ) -> api.StartWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        with tracer.start_as_current_span("perdure.workflow.start") as span:
            normalized, cell = await self._placed_start(request, namespace)
            _describe_start(span, normalized)
            # History keeps this trace's context with the run: the workflow's every later
            # span, on any worker, after any crash, joins this trace.
            response = await cell.call(
                forward(cell.history, "StartWorkflow", normalized, api.StartWorkflowResponse)
            )
            if response.workflow_id != normalized.workflow_id:  # a keyed start's run
                await self._router.record(RUN, namespace, response.workflow_id, cell)
            span.set_attribute("perdure.workflow.created", response.started)
            return response

    @errors.unary
    async def DescribeWorkflow(
        self, request: api.DescribeWorkflowRequest, context: Context
    ) -> api.DescribeWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        described, pauses = await asyncio.gather(
            cell.call(
                forward(
                    cell.history,
                    "DescribeWorkflow",
                    in_namespace(request, namespace),
                    api.DescribeWorkflowResponse,
                )
            ),
            pauses_for_describe(cell.scheduler, namespace),
        )
        described.pauses.extend(holding(described.workflow, pauses))
        if described.flow.settings.HasField("budget"):
            await with_budget_use(cell.scheduler, namespace, described)
        return described

    @errors.unary
    async def GetWorkflowHistory(
        self, request: api.GetWorkflowHistoryRequest, context: Context
    ) -> api.GetWorkflowHistoryResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.page_size(request.page_size)
        validate.page_token(request.page_token)
        validate.event_id("after_event_id", request.after_event_id)
        validate.optional_id("run_id", request.run_id)
        return await self._forward(
            "GetWorkflowHistory",
            in_namespace(request, namespace),
            api.GetWorkflowHistoryResponse,
        )

    @errors.unary
    async def ListWorkflows(
        self, request: api.ListWorkflowsRequest, context: Context
    ) -> api.ListWorkflowsResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.page_size(request.page_size)
        if self._router.single:
            validate.page_token(request.page_token)
        validate.status_filter(request.status)
        if request.workflow_type:
            validate.name("workflow_type", request.workflow_type)
        validate.workflow_id_prefix(request.workflow_id_prefix)
        validate.workflow_id(request.parent_workflow_id, required=False, field="parent_workflow_id")
        scoped = in_namespace(request, namespace)
        if self._router.single:
            home = self._router.home
            return await forward(home.history, "ListWorkflows", scoped, api.ListWorkflowsResponse)

        async def page(cell: Cell, token: str, size: int) -> tuple[list[Any], str]:
            asked = api.ListWorkflowsRequest()
            asked.CopyFrom(scoped)
            asked.page_token, asked.page_size = token, size
            answer = await forward(cell.history, "ListWorkflows", asked, api.ListWorkflowsResponse)
            return list(answer.workflows), answer.next_page_token

        workflows, token = await merge.merged_page(
            self._router.cells,
            request.page_token,
            request.page_size,
            page,
            lambda info: -info.create_time.ToNanoseconds(),  # newest first, as in a cell
        )
        return api.ListWorkflowsResponse(workflows=workflows, next_page_token=token)

    @errors.unary
    async def SignalWorkflow(
        self, request: api.SignalWorkflowRequest, context: Context
    ) -> api.SignalWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        _validate_signal(request)
        return await self._forward(
            "SignalWorkflow",
            in_namespace(_with_payload(request), namespace),
            api.SignalWorkflowResponse,
        )

    @errors.unary
    async def SignalWithStartWorkflow(
        self, request: api.SignalWithStartWorkflowRequest, context: Context
    ) -> api.SignalWithStartWorkflowResponse:
        namespace = self._callers.admit(context, request.start.namespace)
        if not request.start.workflow_id:
            raise errors.invalid_argument("start.workflow_id is required for SignalWithStart")
        if request.start.debounce_key or request.start.singleton_key:
            raise errors.invalid_argument(
                "SignalWithStart takes no debounce_key or singleton_key: it signals one "
                "workflow id; use StartWorkflow with a key, then signal the id it answers"
            )
        _validate_signal(request)
        with tracer.start_as_current_span("perdure.workflow.start") as span:
            normalized = _with_payload(request)
            start, cell = await self._placed_start(request.start, namespace)
            normalized.start.CopyFrom(start)
            _describe_start(span, normalized.start)
            span.set_attribute("perdure.signal.name", request.signal_name)
            response = await cell.call(
                forward(
                    cell.history,
                    "SignalWithStartWorkflow",
                    normalized,
                    api.SignalWithStartWorkflowResponse,
                )
            )
            span.set_attribute("perdure.workflow.created", response.started)
            return response

    @errors.unary
    async def CancelWorkflow(
        self, request: api.CancelWorkflowRequest, context: Context
    ) -> api.CancelWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.reason(request.reason)
        return await self._forward(
            "CancelWorkflow",
            in_namespace(request, namespace),
            api.CancelWorkflowResponse,
        )

    @errors.unary
    async def TerminateWorkflow(
        self, request: api.TerminateWorkflowRequest, context: Context
    ) -> api.TerminateWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.reason(request.reason)
        return await self._forward(
            "TerminateWorkflow",
            in_namespace(request, namespace),
            api.TerminateWorkflowResponse,
        )

    @errors.unary
    async def QueryWorkflow(
        self, request: api.QueryWorkflowRequest, context: Context
    ) -> api.QueryWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.state_key(request.key)
        return await self._forward(
            "QueryWorkflow", in_namespace(request, namespace), api.QueryWorkflowResponse
        )

    @errors.unary
    async def ResumeWorkflow(
        self, request: api.ResumeWorkflowRequest, context: Context
    ) -> api.ResumeWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        validate.reason(request.reason)
        return await self._forward(
            "ResumeWorkflow", in_namespace(request, namespace), api.ResumeWorkflowResponse
        )

    @errors.unary
    async def ResetWorkflow(
        self, request: api.ResetWorkflowRequest, context: Context
    ) -> api.ResetWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        validate.reset_point(request.step_id, request.event_id)
        validate.reason(request.reason)
        return await self._forward(
            "ResetWorkflow", in_namespace(request, namespace), api.ResetWorkflowResponse
        )

    @errors.unary
    async def ForkWorkflow(
        self, request: api.ForkWorkflowRequest, context: Context
    ) -> api.ForkWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        validate.workflow_id(request.new_workflow_id, field="new_workflow_id")
        validate.optional_id("step_id", request.step_id)
        validate.override_step_ids(list(request.overrides))
        validate.reason(request.reason)
        fork = in_namespace(request, namespace)
        for step_id, value in request.overrides.items():
            fork.overrides[step_id].CopyFrom(validate_payload(f"overrides[{step_id!r}]", value))
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        response = await cell.call(
            forward(cell.history, "ForkWorkflow", fork, api.ForkWorkflowResponse)
        )
        await self._router.record(RUN, namespace, request.new_workflow_id, cell)  # made there
        return response

    async def _forward(self, rpc: str, request: Any, answer_type: type[Answer]) -> Answer:
        """Hand a validated request, scoped to its namespace, to history's call of the same
        name in the cell of the run it names; return its answer."""
        cell = await self._router.locate(RUN, request.namespace, request.workflow_id)
        return await cell.call(forward(cell.history, rpc, request, answer_type))

    async def _placed_start(
        self, request: api.StartWorkflowRequest, namespace: str
    ) -> tuple[api.StartWorkflowRequest, Cell]:
        """The start request validated, with defaults filled in, for a type registered in the
        cell it goes to; and that cell. A keyed start goes where its key is placed (one open
        run per key needs one cell per key); any other, where its workflow id is."""
        start = validated_start(request, namespace)
        keyed = _start_key(request)
        if keyed:
            cell = await self._router.place(START_KEY, namespace, keyed)
        else:
            fresh = not request.workflow_id  # an id made here: no cell has it
            cell = await self._router.place(RUN, namespace, start.workflow_id, fresh=fresh)
        await self.require_registered(cell, start)
        return start, cell

    async def require_registered(self, cell: Cell, start: api.StartWorkflowRequest) -> None:
        """NOT_FOUND unless a worker declared the start's type on its queue, in that cell."""
        qualified_queue = namespaces.qualify(start.namespace, start.task_queue)
        workflow_type = start.workflow_type
        if (cell.name, qualified_queue, workflow_type) in self._registered:
            return
        queue = await cell.call(
            cell.scheduler.DescribeTaskQueue(
                spb.DescribeTaskQueueRequest(task_queue=qualified_queue),
                timeout=DOWNSTREAM_TIMEOUT,
            )
        )
        self._registered.update(
            (cell.name, qualified_queue, known) for known in queue.workflow_types
        )
        task_queue = namespaces.split(qualified_queue)[1]
        if workflow_type in queue.workflow_types:
            return
        known = ", ".join(queue.workflow_types) or "none"
        raise errors.not_found(
            Reason.WORKFLOW_TYPE_NOT_REGISTERED,
            f"workflow type {workflow_type!r} is not registered on task queue {task_queue!r}: "
            f"no worker has declared it (registered there: {known}); start a worker that "
            "serves it, or check the name and the task queue",
        )


def validated_start(request: api.StartWorkflowRequest, namespace: str) -> api.StartWorkflowRequest:
    """The start request validated, with defaults filled in (a workflow id made when none)."""
    validate.name("workflow_type", request.workflow_type)
    validate.workflow_id(request.workflow_id, required=False)
    if request.task_queue:
        validate.name("task_queue", request.task_queue)
    input_value = validate_payload("input", request.input)
    validate.id_reuse_policy(request.id_reuse_policy)
    validate.optional_id("request_id", request.request_id)
    validate.start_keys(request)
    start = api.StartWorkflowRequest(
        workflow_type=request.workflow_type,
        workflow_id=request.workflow_id or str(uuid.uuid4()),
        task_queue=request.task_queue or validate.DEFAULT_TASK_QUEUE,
        input=input_value,
        namespace=namespace,
        id_reuse_policy=request.id_reuse_policy,
        request_id=request.request_id,
        debounce_key=request.debounce_key,
        singleton_key=request.singleton_key,
    )
    if request.HasField("debounce_window"):
        start.debounce_window.CopyFrom(request.debounce_window)
    if request.HasField("execution_timeout"):
        validate.execution_timeout(request.execution_timeout)
        start.execution_timeout.CopyFrom(request.execution_timeout)
    if request.HasField("flow"):
        check_run_flow("flow", request.flow)
        start.flow.CopyFrom(request.flow)
    return start


def _start_key(request: api.StartWorkflowRequest) -> str:
    """What places a start that may answer another run than its workflow id: its singleton or
    debounce key, or the request id of a start with no id (whose retry makes a new id)."""
    if request.singleton_key:
        return f"singleton:{request.singleton_key}"
    if request.debounce_key:
        return f"debounce:{request.debounce_key}"
    if request.request_id and not request.workflow_id:
        return f"request:{request.request_id}"
    return ""


def _describe_start(span: trace.Span, start: api.StartWorkflowRequest) -> None:
    span.set_attributes(
        {
            "perdure.workflow.id": start.workflow_id,
            "perdure.workflow.type": start.workflow_type,
            "perdure.task_queue": start.task_queue,
        }
    )


def _validate_signal(request: Signal) -> None:
    validate.name("signal_name", request.signal_name)
    validate.signal_id(request.signal_id)
    validate_payload("payload", request.payload)


def _with_payload(request: Signal) -> Signal:
    """A copy of the request whose payload is as it is stored (an absent one is JSON null)."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.payload.CopyFrom(normalized(request.payload))
    return copy


async def forward(
    history: hgrpc.HistoryServiceStub, rpc: str, request: Message, answer_type: type[Answer]
) -> Answer:
    """Hand a validated request to history's call of the same name; return its answer. The
    call vouches for this call's API key, whose namespace history holds it to."""
    wrapped = getattr(hpb, f"{rpc}Request")(request=request)
    answer = await getattr(history, rpc)(wrapped, timeout=DOWNSTREAM_TIMEOUT, metadata=vouched())
    response = answer.response
    assert isinstance(response, answer_type)
    return response


# AdminService calls that set something, made in every cell: each cell's scheduler grants its
# own runs' tasks (routing, pauses, limits, budgets: each cell enforces a limit or budget on
# its own runs), and each cell's history checks keys against its own database.
SCHEDULER_EVERYWHERE = {
    "SetWorkflowPolicy",
    "Pause",
    "Unpause",
    "SetFlowLimit",
    "DeleteFlowLimit",
    "SetBudget",
    "DeleteBudget",
}
HISTORY_EVERYWHERE = {"RevokeApiKey", "SetRetention"}


class AdminServicer(
    BuildsAdmin,
    FlowAdmin,
    PausesAdmin,
    RetentionAdmin,
    StorageAdmin,
    admingrpc.AdminServiceServicer,
):
    """Key management and the audit log of the admin key's namespace: each call goes to
    history's of the same name, with the caller. Builds, workers and routing policies are
    BuildsAdmin's; limits and budgets FlowAdmin's; pauses PausesAdmin's; retention
    RetentionAdmin's; storage, export and import StorageAdmin's. With several cells, these go
    to the first cell (`Router.home`), a setting to every cell; a call about one run asks the
    router."""

    def __init__(self, router: Router, callers: Callers, keys: RememberedKeys) -> None:
        self._router = router
        self._history: hgrpc.HistoryServiceStub = cast(
            hgrpc.HistoryServiceStub,
            EveryCell(router, lambda cell: cell.history, HISTORY_EVERYWHERE),
        )
        self._scheduler: sgrpc.SchedulerServiceStub = cast(
            sgrpc.SchedulerServiceStub,
            EveryCell(router, lambda cell: cell.scheduler, SCHEDULER_EVERYWHERE),
        )
        self._callers = callers
        self._keys = keys

    async def _forward(
        self, rpc: str, request: Message, context: Context, answer_type: type[Answer]
    ) -> Answer:
        self._callers.admit(context, "")
        return await forward(self._history, rpc, request, answer_type)

    @errors.unary
    async def CreateApiKey(
        self, request: admin.CreateApiKeyRequest, context: Context
    ) -> admin.CreateApiKeyResponse:
        if not self._router.single:
            self._callers.admit(context, "")
            raise errors.failed_precondition(
                "",
                "with several cells a key must be valid in every cell's database (each cell's "
                "history and scheduler check its workers' keys), and history makes a key's "
                "secret in one database: create it with `perdure keys create --database-url "
                "<the first cell's database>`, then copy its row of history.api_keys to every "
                "other cell's database (docs/operations.md, Cells)",
            )
        return await self._forward("CreateApiKey", request, context, admin.CreateApiKeyResponse)

    @errors.unary
    async def RevokeApiKey(
        self, request: admin.RevokeApiKeyRequest, context: Context
    ) -> admin.RevokeApiKeyResponse:
        answer = await self._forward("RevokeApiKey", request, context, admin.RevokeApiKeyResponse)
        self._keys.forget(request.key_id)  # refused from the very next call through here
        return answer

    @errors.unary
    async def ListApiKeys(
        self, request: admin.ListApiKeysRequest, context: Context
    ) -> admin.ListApiKeysResponse:
        return await self._forward("ListApiKeys", request, context, admin.ListApiKeysResponse)

    @errors.unary
    async def ListAuditEvents(
        self, request: admin.ListAuditEventsRequest, context: Context
    ) -> admin.ListAuditEventsResponse:
        validate.page_token(request.page_token)
        return await self._forward(
            "ListAuditEvents", request, context, admin.ListAuditEventsResponse
        )
