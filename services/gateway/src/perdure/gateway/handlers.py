"""The public WorkflowService and AdminService: check the caller's namespace and rate, validate,
then ask history (and the scheduler for types)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, TypeVar

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
from perdure.gateway import validate
from perdure.gateway.builds import BuildsAdmin
from perdure.gateway.flow_admin import FlowAdmin, with_budget_use
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.gateway.live import LiveCalls
from perdure.gateway.pauses import PausesAdmin, holding, pauses_for_describe
from perdure.gateway.retention import RetentionAdmin
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

    def __init__(
        self,
        history: hgrpc.HistoryServiceStub,
        scheduler: sgrpc.SchedulerServiceStub,
        callers: Callers,
    ) -> None:
        self._history = history
        self._scheduler = scheduler
        self._callers = callers
        # The scheduler never forgets a declared type, so a yes is remembered: a start of a
        # known type costs no call to the scheduler.
        self._registered: set[tuple[str, str]] = set()

    @errors.unary
    async def StartWorkflow(
        self, request: api.StartWorkflowRequest, context: Context
    ) -> api.StartWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        with tracer.start_as_current_span("perdure.workflow.start") as span:
            normalized = await self._normalized_start(request, namespace)
            _describe_start(span, normalized)
            # History keeps this trace's context with the run: the workflow's every later
            # span, on any worker, after any crash, joins this trace.
            response = await self._forward("StartWorkflow", normalized, api.StartWorkflowResponse)
            span.set_attribute("perdure.workflow.created", response.started)
            return response

    @errors.unary
    async def DescribeWorkflow(
        self, request: api.DescribeWorkflowRequest, context: Context
    ) -> api.DescribeWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        described, pauses = await asyncio.gather(
            self._forward(
                "DescribeWorkflow", in_namespace(request, namespace), api.DescribeWorkflowResponse
            ),
            pauses_for_describe(self._scheduler, namespace),
        )
        described.pauses.extend(holding(described.workflow, pauses))
        if described.flow.settings.HasField("budget"):
            await with_budget_use(self._scheduler, namespace, described)
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
        validate.page_token(request.page_token)
        validate.status_filter(request.status)
        if request.workflow_type:
            validate.name("workflow_type", request.workflow_type)
        validate.workflow_id_prefix(request.workflow_id_prefix)
        validate.workflow_id(request.parent_workflow_id, required=False, field="parent_workflow_id")
        return await self._forward(
            "ListWorkflows", in_namespace(request, namespace), api.ListWorkflowsResponse
        )

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
            normalized.start.CopyFrom(await self._normalized_start(request.start, namespace))
            _describe_start(span, normalized.start)
            span.set_attribute("perdure.signal.name", request.signal_name)
            response = await self._forward(
                "SignalWithStartWorkflow", normalized, api.SignalWithStartWorkflowResponse
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
        return await self._forward("ForkWorkflow", fork, api.ForkWorkflowResponse)

    async def _forward(self, rpc: str, request: Message, answer_type: type[Answer]) -> Answer:
        """Hand a validated request to history's call of the same name; return its answer."""
        return await forward(self._history, rpc, request, answer_type)

    async def _normalized_start(
        self, request: api.StartWorkflowRequest, namespace: str
    ) -> api.StartWorkflowRequest:
        """The start request validated, with defaults filled in, for a registered type."""
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
        await self._require_registered(
            namespaces.qualify(namespace, start.task_queue), start.workflow_type
        )
        return start

    async def _require_registered(self, qualified_queue: str, workflow_type: str) -> None:
        if (qualified_queue, workflow_type) in self._registered:
            return
        queue = await self._scheduler.DescribeTaskQueue(
            spb.DescribeTaskQueueRequest(task_queue=qualified_queue), timeout=DOWNSTREAM_TIMEOUT
        )
        self._registered.update((qualified_queue, known) for known in queue.workflow_types)
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


class AdminServicer(
    BuildsAdmin, FlowAdmin, PausesAdmin, RetentionAdmin, admingrpc.AdminServiceServicer
):
    """Key management and the audit log of the admin key's namespace: each call goes to
    history's of the same name, with the caller. Builds, workers and routing policies are
    BuildsAdmin's; limits and budgets FlowAdmin's; pauses PausesAdmin's; retention
    RetentionAdmin's."""

    def __init__(
        self,
        history: hgrpc.HistoryServiceStub,
        scheduler: sgrpc.SchedulerServiceStub,
        callers: Callers,
        keys: RememberedKeys,
    ) -> None:
        self._history = history
        self._scheduler = scheduler
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
