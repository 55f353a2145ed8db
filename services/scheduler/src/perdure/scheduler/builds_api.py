"""The operators' view of builds, as the scheduler serves it to the gateway: routing policies,
the worker sessions connected to this replica, and the builds seen on each task queue (without
the run counts, which are history's)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors, namespaces
from perdure.common.convert import timestamp
from perdure.common.text import printable, require_storable
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.scheduler.builds import API_VALUE, BuildRow, PolicyRow, policy_of
from perdure.scheduler.dispatcher import Dispatcher, Session
from perdure.scheduler.store import TaskStore

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]


def _queue_filter(namespace: str, task_queue: str) -> str:
    """The qualified queue a request names ('' for all of the namespace's)."""
    if not task_queue:
        return ""
    namespaces.require_public("task_queue", task_queue)
    require_storable("task_queue", task_queue)
    return namespaces.qualify(namespace, task_queue)


def _policy(row: PolicyRow) -> admin.WorkflowPolicy:
    return admin.WorkflowPolicy(
        namespace=row.namespace,
        workflow_type=row.workflow_type,
        policy=API_VALUE.get(row.policy or "", admin.ROUTING_POLICY_UNVERSIONED),  # type: ignore[arg-type]
        update_time=timestamp(row.updated_at),
    )


def _worker(session: Session) -> admin.WorkerInfo:
    info = admin.WorkerInfo(
        identity=session.identity,
        build_id=session.build_id,
        task_queue=namespaces.split(session.task_queue)[1],
        workflow_types=session.workflow_types,
        step_types=session.step_types,
        capacity=session.capacity,
        tasks_in_flight=len(session.leases),
    )
    info.connect_time.FromDatetime(datetime.fromtimestamp(session.connected_at, UTC))
    return info


def _build(
    namespace: str, row: BuildRow, sessions: list[Session], newest: dict[tuple[str, str], str]
) -> admin.BuildInfo:
    """A build seen, with its sessions connected here and the types it is the newest of."""
    return admin.BuildInfo(
        namespace=namespace,
        task_queue=namespaces.split(row.task_queue)[1],
        build_id=row.build_id,
        first_seen_time=timestamp(row.first_seen_at),
        last_seen_time=timestamp(row.last_seen_at),
        connected_workers=sum(
            1 for s in sessions if s.task_queue == row.task_queue and s.build_id == row.build_id
        ),
        workflow_types=row.workflow_types,
        newest_for=sorted(
            t for (q, t), build in newest.items() if q == row.task_queue and build == row.build_id
        ),
    )


class BuildsApi:
    """SchedulerService's calls for AdminService's builds, workers and policies."""

    _store: TaskStore
    _dispatcher: Dispatcher

    @errors.unary
    async def SetWorkflowPolicy(
        self, request: spb.SetWorkflowPolicyRequest, context: Context
    ) -> spb.SetWorkflowPolicyResponse:
        r = request.request
        namespace = namespaces.resolve(r.namespace)
        if not r.workflow_type:
            raise errors.invalid_argument("workflow_type is required")
        require_storable("workflow_type", r.workflow_type)
        row = await self._store.set_policy(namespace, r.workflow_type, policy_of(r.policy))
        log.info(
            "routing policy of workflow type %s in namespace %s: %s",
            printable(r.workflow_type),
            namespace,
            row.policy or "unversioned",
        )
        self._dispatcher.wake()  # tasks the old policy held back may be grantable now
        return spb.SetWorkflowPolicyResponse(
            response=admin.SetWorkflowPolicyResponse(policy=_policy(row))
        )

    @errors.unary
    async def ListWorkflowPolicies(
        self, request: spb.ListWorkflowPoliciesRequest, context: Context
    ) -> spb.ListWorkflowPoliciesResponse:
        rows = await self._store.policies(namespaces.resolve(request.request.namespace))
        return spb.ListWorkflowPoliciesResponse(
            response=admin.ListWorkflowPoliciesResponse(policies=[_policy(row) for row in rows])
        )

    @errors.unary
    async def ListWorkers(
        self, request: spb.ListWorkersRequest, context: Context
    ) -> spb.ListWorkersResponse:
        namespace = namespaces.resolve(request.request.namespace)
        queue = _queue_filter(namespace, request.request.task_queue)
        sessions = sorted(
            (
                s
                for s in self._dispatcher.sessions()
                if namespaces.namespace_of(s.task_queue) == namespace
                and (not queue or s.task_queue == queue)
            ),
            key=lambda s: (s.task_queue, s.build_id, s.identity, s.connected_at),
        )
        return spb.ListWorkersResponse(
            response=admin.ListWorkersResponse(workers=[_worker(s) for s in sessions])
        )

    @errors.unary
    async def ListBuilds(
        self, request: spb.ListBuildsRequest, context: Context
    ) -> spb.ListBuildsResponse:
        namespace = namespaces.resolve(request.request.namespace)
        queue = _queue_filter(namespace, request.request.task_queue)
        rows = await self._store.builds(namespace, queue)
        sessions = self._dispatcher.sessions()
        newest = self._dispatcher.newest_builds()
        builds = [_build(namespace, row, sessions, newest) for row in rows]
        return spb.ListBuildsResponse(response=admin.ListBuildsResponse(builds=builds))
