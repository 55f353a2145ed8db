"""AdminService's builds, workers and routing policies: validated here, answered by the
scheduler (policies, sessions, builds seen), with the open runs of each build counted by
history."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors
from perdure.gateway import validate
from perdure.gateway.cells import Router
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

if TYPE_CHECKING:
    from perdure.gateway.handlers import Callers

Context = grpc.aio.ServicerContext[Any, Any]
DOWNSTREAM_TIMEOUT = 30.0
POLICIES = (
    admin.ROUTING_POLICY_UNVERSIONED,
    admin.ROUTING_POLICY_PINNED,
    admin.ROUTING_POLICY_AUTO_UPGRADE,
)


def routing_policy(value: int) -> None:
    """A policy to set: one of the three (unversioned removes the type's policy)."""
    if value not in POLICIES:
        raise errors.invalid_argument(
            f"policy {value} is not a routing policy: use ROUTING_POLICY_PINNED, "
            "ROUTING_POLICY_AUTO_UPGRADE or ROUTING_POLICY_UNVERSIONED"
        )


def _queue(task_queue: str) -> None:
    if task_queue:
        validate.name("task_queue", task_queue)


def with_run_counts(
    builds: list[admin.BuildInfo],
    counts: list[hpb.BuildRunCount],
    policies: list[admin.WorkflowPolicy],
) -> list[admin.BuildInfo]:
    """The builds with the open runs each started, and those of pinned types among them."""
    pinned = {p.workflow_type for p in policies if p.policy == admin.ROUTING_POLICY_PINNED}
    open_runs: dict[tuple[str, str], int] = defaultdict(int)
    pinned_runs: dict[tuple[str, str], int] = defaultdict(int)
    for count in counts:
        key = (count.task_queue, count.build_id)
        open_runs[key] += count.open_runs
        if count.workflow_type in pinned:
            pinned_runs[key] += count.open_runs
    for build in builds:
        key = (build.task_queue, build.build_id)
        build.open_runs, build.pinned_runs = open_runs[key], pinned_runs[key]
    return builds


class BuildsAdmin:
    """The AdminService calls about builds; the caller's namespace, as `admit` resolves it."""

    _history: hgrpc.HistoryServiceStub
    _scheduler: sgrpc.SchedulerServiceStub
    _callers: Callers
    _router: Router

    def _namespace(self, context: Context, requested: str) -> str:
        return self._callers.admit(context, requested)

    @errors.unary
    async def SetWorkflowPolicy(
        self, request: admin.SetWorkflowPolicyRequest, context: Context
    ) -> admin.SetWorkflowPolicyResponse:
        namespace = self._namespace(context, request.namespace)
        validate.name("workflow_type", request.workflow_type)
        routing_policy(request.policy)
        scoped = admin.SetWorkflowPolicyRequest(
            namespace=namespace, workflow_type=request.workflow_type, policy=request.policy
        )
        answer: spb.SetWorkflowPolicyResponse = await self._scheduler.SetWorkflowPolicy(
            spb.SetWorkflowPolicyRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
        )
        return answer.response

    @errors.unary
    async def ListWorkflowPolicies(
        self, request: admin.ListWorkflowPoliciesRequest, context: Context
    ) -> admin.ListWorkflowPoliciesResponse:
        return await self._policies(self._namespace(context, request.namespace))

    @errors.unary
    async def ListWorkers(
        self, request: admin.ListWorkersRequest, context: Context
    ) -> admin.ListWorkersResponse:
        namespace = self._namespace(context, request.namespace)
        _queue(request.task_queue)
        scoped = admin.ListWorkersRequest(namespace=namespace, task_queue=request.task_queue)
        answers: list[spb.ListWorkersResponse] = await self._router.every(
            lambda cell: cell.scheduler.ListWorkers(
                spb.ListWorkersRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
            )
        )
        # Every cell's sessions, in cell order: a worker serving several shows once for each.
        listed = answers[0].response
        for answer in answers[1:]:
            listed.workers.extend(answer.response.workers)
        return listed

    @errors.unary
    async def ListBuilds(
        self, request: admin.ListBuildsRequest, context: Context
    ) -> admin.ListBuildsResponse:
        namespace = self._namespace(context, request.namespace)
        _queue(request.task_queue)
        scoped = admin.ListBuildsRequest(namespace=namespace, task_queue=request.task_queue)
        seen = await self._scheduler.ListBuilds(
            spb.ListBuildsRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
        )
        counted = await self._router.every(  # every cell's open runs, summed
            lambda cell: cell.history.CountOpenRunsByBuild(
                hpb.CountOpenRunsByBuildRequest(namespace=namespace), timeout=DOWNSTREAM_TIMEOUT
            )
        )
        counts = [count for answer in counted for count in answer.counts]
        policies = await self._policies(namespace)
        builds = with_run_counts(list(seen.response.builds), counts, list(policies.policies))
        return admin.ListBuildsResponse(builds=builds)

    async def _policies(self, namespace: str) -> admin.ListWorkflowPoliciesResponse:
        scoped = admin.ListWorkflowPoliciesRequest(namespace=namespace)
        answer: spb.ListWorkflowPoliciesResponse = await self._scheduler.ListWorkflowPolicies(
            spb.ListWorkflowPoliciesRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
        )
        return answer.response
