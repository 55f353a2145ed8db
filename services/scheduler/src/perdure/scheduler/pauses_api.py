"""AdminService's pauses, as the scheduler serves them to the gateway: pause, unpause and list
the namespace's pauses (the gateway has checked that a paused workflow id names an open run)."""

from __future__ import annotations

import logging
from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.workflow.v1 import workflow_pb2 as wpb
from perdure.common import errors, namespaces
from perdure.common.convert import timestamp
from perdure.common.reasons import Reason
from perdure.common.text import printable
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.scheduler.dispatcher import Dispatcher
from perdure.scheduler.pauses import PauseRow, Scope, stored_name
from perdure.scheduler.store import TaskStore

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]

API_SCOPE: dict[Scope, int] = {
    Scope.WORKFLOW: wpb.PAUSE_SCOPE_WORKFLOW,
    Scope.WORKFLOW_TYPE: wpb.PAUSE_SCOPE_WORKFLOW_TYPE,
    Scope.TASK_QUEUE: wpb.PAUSE_SCOPE_TASK_QUEUE,
}


def target(request: admin.PauseRequest | admin.UnpauseRequest) -> tuple[Scope, str]:
    """The one scope a request names, and its public name; INVALID_ARGUMENT for none or two."""
    named = [
        (scope, value)
        for scope, value in (
            (Scope.WORKFLOW, request.workflow_id),
            (Scope.WORKFLOW_TYPE, request.workflow_type),
            (Scope.TASK_QUEUE, request.task_queue),
        )
        if value
    ]
    if len(named) != 1:
        raise errors.invalid_argument(
            f"name exactly one of workflow_id, workflow_type and task_queue ({len(named)} given)"
        )
    return named[0]


def pause_message(row: PauseRow) -> wpb.Pause:
    """A pause as the API shows it."""
    return wpb.Pause(
        scope=API_SCOPE[row.scope],  # type: ignore[arg-type]
        name=row.public_name,
        reason=row.reason,
        pause_time=timestamp(row.paused_at),
        paused_by=row.paused_by,
    )


class PausesApi:
    """SchedulerService's calls for AdminService's pauses."""

    _store: TaskStore
    _dispatcher: Dispatcher

    @errors.unary
    async def Pause(self, request: spb.PauseRequest, context: Context) -> spb.PauseResponse:
        r = request.request
        namespace = namespaces.resolve(r.namespace)
        scope, name = target(r)
        stored = stored_name(namespace, scope, name)
        if scope != Scope.WORKFLOW and not await self._store.declared(namespace, scope, stored):
            raise _undeclared(scope, name, namespace)
        row, changed = await self._store.pause(
            namespace, scope, stored, r.reason, request.paused_by
        )
        if changed:
            log.info("paused %s %s in namespace %s", scope.value, printable(name), namespace)
        return spb.PauseResponse(
            response=admin.PauseResponse(pause=pause_message(row), changed=changed)
        )

    @errors.unary
    async def Unpause(self, request: spb.UnpauseRequest, context: Context) -> spb.UnpauseResponse:
        r = request.request
        namespace = namespaces.resolve(r.namespace)
        scope, name = target(r)
        changed = await self._store.unpause(namespace, scope, stored_name(namespace, scope, name))
        if changed:
            log.info("unpaused %s %s in namespace %s", scope.value, printable(name), namespace)
            # This replica grants what waited at once; the others at their next look, within
            # MAX_IDLE_SECONDS.
            self._dispatcher.wake()
        return spb.UnpauseResponse(response=admin.UnpauseResponse(changed=changed))

    @errors.unary
    async def ListPauses(
        self, request: spb.ListPausesRequest, context: Context
    ) -> spb.ListPausesResponse:
        rows = await self._store.pauses(namespaces.resolve(request.request.namespace))
        return spb.ListPausesResponse(
            response=admin.ListPausesResponse(pauses=[pause_message(row) for row in rows])
        )


def _undeclared(scope: Scope, name: str, namespace: str) -> errors.ApiError:
    """NOT_FOUND for a type or queue no worker ever declared: most likely a typo."""
    if scope == Scope.WORKFLOW_TYPE:
        return errors.not_found(
            Reason.WORKFLOW_TYPE_NOT_REGISTERED,
            f"workflow type {name[:200]!r} was never declared by a worker in namespace "
            f"{namespace!r}; check the name (pause it once a worker has declared it)",
        )
    return errors.not_found(
        Reason.TASK_QUEUE_NOT_FOUND,
        f"task queue {name[:200]!r} was never served by a worker in namespace {namespace!r}; "
        "check the name (pause it once a worker has connected to it)",
    )
