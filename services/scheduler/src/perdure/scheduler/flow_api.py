"""Operators' keys and budgets, as the scheduler serves them to the gateway's AdminService."""

from __future__ import annotations

import logging
from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors, namespaces
from perdure.common.flow import check_budget, check_key
from perdure.common.reasons import Reason
from perdure.common.text import printable, require_storable
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.scheduler.dispatcher import Dispatcher
from perdure.scheduler.flow.convert import budget_info, flow_limit, key_limit_of, period_of
from perdure.scheduler.flow.model import Scope
from perdure.scheduler.store import TaskStore

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]


def _budget_scope(key: str) -> tuple[Scope, str]:
    """The budget a key names: its own, or the namespace's for ''."""
    if not key:
        return Scope.NAMESPACE, ""
    check_key("key", key)
    return Scope.KEY, key


class FlowApi:
    """SchedulerService's calls for AdminService's limits and budgets."""

    _store: TaskStore
    _dispatcher: Dispatcher

    @errors.unary
    async def SetFlowLimit(
        self, request: spb.SetFlowLimitRequest, context: Context
    ) -> spb.SetFlowLimitResponse:
        namespace = namespaces.resolve(request.request.namespace)
        limit = key_limit_of(request.request.limit)
        stored = await self._store.set_limit(namespace, limit)
        log.info("limits of key %s in namespace %s set", printable(limit.key), namespace)
        self._dispatcher.wake()  # a raised limit may let waiting tasks through now
        return spb.SetFlowLimitResponse(
            response=admin.SetFlowLimitResponse(limit=flow_limit(stored))
        )

    @errors.unary
    async def DeleteFlowLimit(
        self, request: spb.DeleteFlowLimitRequest, context: Context
    ) -> spb.DeleteFlowLimitResponse:
        namespace = namespaces.resolve(request.request.namespace)
        key = request.request.key
        check_key("key", key)
        if not await self._store.delete_limit(namespace, key):
            raise errors.not_found(
                Reason.FLOW_LIMIT_NOT_FOUND, f"key {key[:100]!r} has no limits in {namespace!r}"
            )
        self._dispatcher.wake()
        return spb.DeleteFlowLimitResponse(response=admin.DeleteFlowLimitResponse())

    @errors.unary
    async def ListFlowLimits(
        self, request: spb.ListFlowLimitsRequest, context: Context
    ) -> spb.ListFlowLimitsResponse:
        limits = await self._store.limits(namespaces.resolve(request.request.namespace))
        return spb.ListFlowLimitsResponse(
            response=admin.ListFlowLimitsResponse(limits=[flow_limit(limit) for limit in limits])
        )

    @errors.unary
    async def SetBudget(
        self, request: spb.SetBudgetRequest, context: Context
    ) -> spb.SetBudgetResponse:
        namespace = namespaces.resolve(request.request.namespace)
        budget = request.request.budget
        if budget.workflow_id:
            raise errors.invalid_argument(
                "budget.workflow_id is output only: a run's budget is set by its start "
                "(StartWorkflowRequest.flow.budget)"
            )
        scope, name = _budget_scope(budget.key)
        check_budget("budget.limit", budget.limit)
        row = await self._store.set_budget(
            namespace,
            scope,
            name,
            budget.limit.units if budget.limit.HasField("units") else None,
            budget.limit.cost_micros if budget.limit.HasField("cost_micros") else None,
            period_of(budget.period),
        )
        self._dispatcher.wake()
        return spb.SetBudgetResponse(response=admin.SetBudgetResponse(budget=budget_info(row)))

    @errors.unary
    async def DeleteBudget(
        self, request: spb.DeleteBudgetRequest, context: Context
    ) -> spb.DeleteBudgetResponse:
        namespace = namespaces.resolve(request.request.namespace)
        scope, name = _budget_scope(request.request.key)
        if not await self._store.delete_budget(namespace, scope, name):
            what = f"key {name[:100]!r}" if name else "the namespace"
            raise errors.not_found(
                Reason.BUDGET_NOT_FOUND, f"{what} has no budget in {namespace!r}"
            )
        self._dispatcher.wake()
        return spb.DeleteBudgetResponse(response=admin.DeleteBudgetResponse())

    @errors.unary
    async def ListBudgets(
        self, request: spb.ListBudgetsRequest, context: Context
    ) -> spb.ListBudgetsResponse:
        namespace = namespaces.resolve(request.request.namespace)
        workflow_id = request.request.workflow_id
        if workflow_id:
            namespaces.require_public("workflow_id", workflow_id)
            require_storable("workflow_id", workflow_id)
            run = namespaces.qualify(namespace, workflow_id)
            rows = await self._store.budgets(namespace, [Scope.RUN], run)
        else:
            rows = await self._store.budgets(namespace, [Scope.NAMESPACE, Scope.KEY])
        return spb.ListBudgetsResponse(
            response=admin.ListBudgetsResponse(budgets=[budget_info(row) for row in rows])
        )
