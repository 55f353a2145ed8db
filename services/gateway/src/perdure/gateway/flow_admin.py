"""AdminService's calls about flow control: keys' limits and budgets, checked here and kept by
the scheduler, in the caller's namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from google.protobuf.message import Message

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.flow import check_budget, check_key
from perdure.gateway import validate
from perdure.gateway.builds import DOWNSTREAM_TIMEOUT
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

if TYPE_CHECKING:
    from perdure.gateway.handlers import Callers

Context = grpc.aio.ServicerContext[Any, Any]
Answer = TypeVar("Answer", bound=Message)


async def with_budget_use(
    scheduler: sgrpc.SchedulerServiceStub, namespace: str, described: api.DescribeWorkflowResponse
) -> None:
    """Add to a described run with a budget of its own what its steps hold and used of it
    (the scheduler's: the latest run of the workflow id)."""
    workflow_id = described.workflow.workflow_id
    scoped = admin.ListBudgetsRequest(namespace=namespace, workflow_id=workflow_id)
    answer = await scheduler.ListBudgets(
        spb.ListBudgetsRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
    )
    for budget in answer.response.budgets:
        described.flow.reserved.CopyFrom(budget.reserved)
        described.flow.spent.CopyFrom(budget.spent)
        described.flow.refusals = budget.refusals


class FlowAdmin:
    """The AdminService calls about limits and budgets; the caller's namespace, as `admit`
    resolves it."""

    _scheduler: sgrpc.SchedulerServiceStub
    _callers: Callers

    async def _to_scheduler(self, rpc: str, scoped: Message) -> Any:
        """The scheduler's answer to its call `rpc` wrapping `scoped` (its public response)."""
        internal = getattr(spb, f"{rpc}Request")(request=scoped)
        answer = await getattr(self._scheduler, rpc)(internal, timeout=DOWNSTREAM_TIMEOUT)
        return answer.response

    @errors.unary
    async def SetFlowLimit(
        self, request: admin.SetFlowLimitRequest, context: Context
    ) -> admin.SetFlowLimitResponse:
        namespace = self._callers.admit(context, request.namespace)
        check_key("limit.key", request.limit.key)
        scoped = admin.SetFlowLimitRequest(namespace=namespace, limit=request.limit)
        answer: admin.SetFlowLimitResponse = await self._to_scheduler("SetFlowLimit", scoped)
        return answer

    @errors.unary
    async def DeleteFlowLimit(
        self, request: admin.DeleteFlowLimitRequest, context: Context
    ) -> admin.DeleteFlowLimitResponse:
        namespace = self._callers.admit(context, request.namespace)
        check_key("key", request.key)
        scoped = admin.DeleteFlowLimitRequest(namespace=namespace, key=request.key)
        answer: admin.DeleteFlowLimitResponse = await self._to_scheduler("DeleteFlowLimit", scoped)
        return answer

    @errors.unary
    async def ListFlowLimits(
        self, request: admin.ListFlowLimitsRequest, context: Context
    ) -> admin.ListFlowLimitsResponse:
        namespace = self._callers.admit(context, request.namespace)
        scoped = admin.ListFlowLimitsRequest(namespace=namespace)
        answer: admin.ListFlowLimitsResponse = await self._to_scheduler("ListFlowLimits", scoped)
        return answer

    @errors.unary
    async def SetBudget(
        self, request: admin.SetBudgetRequest, context: Context
    ) -> admin.SetBudgetResponse:
        namespace = self._callers.admit(context, request.namespace)
        budget = request.budget
        check_key("budget.key", budget.key, empty_ok=True)
        check_budget("budget.limit", budget.limit)
        stored = admin.BudgetInfo(key=budget.key, limit=budget.limit, period=budget.period)
        scoped = admin.SetBudgetRequest(namespace=namespace, budget=stored)
        answer: admin.SetBudgetResponse = await self._to_scheduler("SetBudget", scoped)
        return answer

    @errors.unary
    async def DeleteBudget(
        self, request: admin.DeleteBudgetRequest, context: Context
    ) -> admin.DeleteBudgetResponse:
        namespace = self._callers.admit(context, request.namespace)
        check_key("key", request.key, empty_ok=True)
        scoped = admin.DeleteBudgetRequest(namespace=namespace, key=request.key)
        answer: admin.DeleteBudgetResponse = await self._to_scheduler("DeleteBudget", scoped)
        return answer

    @errors.unary
    async def ListBudgets(
        self, request: admin.ListBudgetsRequest, context: Context
    ) -> admin.ListBudgetsResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id, required=False)
        scoped = admin.ListBudgetsRequest(namespace=namespace, workflow_id=request.workflow_id)
        answer: admin.ListBudgetsResponse = await self._to_scheduler("ListBudgets", scoped)
        return answer
