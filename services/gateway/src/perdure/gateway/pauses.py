"""AdminService's pauses: validated here, kept by the scheduler (which decides grants). A paused
workflow id must name an open run, which history knows; DescribeWorkflow shows the pauses that
hold a run, read from the scheduler beside history's answer."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.workflow.v1 import workflow_pb2 as wpb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.auth import current_principal
from perdure.common.reasons import Reason
from perdure.gateway import validate
from perdure.gateway.cells import RUN, Router
from perdure.gateway.forwarding import vouched
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

if TYPE_CHECKING:
    from perdure.gateway.handlers import Callers

Context = grpc.aio.ServicerContext[Any, Any]
DOWNSTREAM_TIMEOUT = 30.0
DESCRIBE_PAUSES_TIMEOUT = 2.0
log = logging.getLogger(__name__)
OPEN_STATUSES = (wpb.WORKFLOW_STATUS_RUNNING, wpb.WORKFLOW_STATUS_WAITING)


def _target(request: admin.PauseRequest | admin.UnpauseRequest) -> None:
    """Exactly one well-formed scope (the scheduler checks the count again)."""
    if request.workflow_id:
        validate.workflow_id(request.workflow_id)
    if request.workflow_type:
        validate.name("workflow_type", request.workflow_type)
    if request.task_queue:
        validate.name("task_queue", request.task_queue)
    given = sum(1 for v in (request.workflow_id, request.workflow_type, request.task_queue) if v)
    if given != 1:
        raise errors.invalid_argument(
            f"name exactly one of workflow_id, workflow_type and task_queue ({given} given)"
        )


def _scope_of(request: admin.UnpauseRequest) -> tuple[wpb.PauseScope, str]:
    """The scope and name an (validated) unpause names."""
    if request.workflow_id:
        return wpb.PAUSE_SCOPE_WORKFLOW, request.workflow_id
    if request.workflow_type:
        return wpb.PAUSE_SCOPE_WORKFLOW_TYPE, request.workflow_type
    return wpb.PAUSE_SCOPE_TASK_QUEUE, request.task_queue


def holding(run: wpb.WorkflowInfo, pauses: list[wpb.Pause]) -> list[wpb.Pause]:
    """The pauses that hold an open run back: its workflow id's, its type's, its queue's."""
    if run.status not in OPEN_STATUSES:
        return []
    names = {
        wpb.PAUSE_SCOPE_WORKFLOW: run.workflow_id,
        wpb.PAUSE_SCOPE_WORKFLOW_TYPE: run.workflow_type,
        wpb.PAUSE_SCOPE_TASK_QUEUE: run.task_queue,
    }
    return [p for p in pauses if names.get(p.scope) == p.name]


async def list_pauses(
    scheduler: sgrpc.SchedulerServiceStub, namespace: str, deadline: float = DOWNSTREAM_TIMEOUT
) -> list[wpb.Pause]:
    """The namespace's pauses in force (the call's deadline in seconds)."""
    scoped = admin.ListPausesRequest(namespace=namespace)
    answer: spb.ListPausesResponse = await scheduler.ListPauses(
        spb.ListPausesRequest(request=scoped), timeout=deadline
    )
    return list(answer.response.pauses)


async def pauses_for_describe(
    scheduler: sgrpc.SchedulerServiceStub, namespace: str
) -> list[wpb.Pause]:
    """The namespace's pauses, or none when the scheduler does not answer soon: describe reads
    history alone otherwise, and must keep working while the scheduler is away (logged)."""
    try:
        return await list_pauses(scheduler, namespace, deadline=DESCRIBE_PAUSES_TIMEOUT)
    except grpc.aio.AioRpcError as error:
        log.warning("describe without its pauses: the scheduler did not answer (%s)", error.code())
        return []


class PausesAdmin:
    """The AdminService calls about pauses; the caller's namespace, as `admit` resolves it."""

    _history: hgrpc.HistoryServiceStub
    _scheduler: sgrpc.SchedulerServiceStub
    _router: Router
    _callers: Callers

    @errors.unary
    async def Pause(self, request: admin.PauseRequest, context: Context) -> admin.PauseResponse:
        namespace = self._callers.admit(context, request.namespace)
        _target(request)
        validate.reason(request.reason)
        if request.workflow_id:
            await self._require_open(namespace, request.workflow_id)
        scoped = admin.PauseRequest()
        scoped.CopyFrom(request)
        scoped.namespace = namespace
        principal = current_principal.get()
        answer: spb.PauseResponse = await self._scheduler.Pause(
            spb.PauseRequest(request=scoped, paused_by=principal.key_id if principal else ""),
            timeout=DOWNSTREAM_TIMEOUT,
        )
        pause = answer.response.pause
        await self._audit(
            namespace, True, pause.scope, pause.name, request.reason, answer.response.changed
        )
        return answer.response

    @errors.unary
    async def Unpause(
        self, request: admin.UnpauseRequest, context: Context
    ) -> admin.UnpauseResponse:
        namespace = self._callers.admit(context, request.namespace)
        _target(request)
        scoped = admin.UnpauseRequest()
        scoped.CopyFrom(request)
        scoped.namespace = namespace
        answer: spb.UnpauseResponse = await self._scheduler.Unpause(
            spb.UnpauseRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT
        )
        scope, name = _scope_of(request)
        await self._audit(namespace, False, scope, name, "", answer.response.changed)
        return answer.response

    @errors.unary
    async def ListPauses(
        self, request: admin.ListPausesRequest, context: Context
    ) -> admin.ListPausesResponse:
        namespace = self._callers.admit(context, request.namespace)
        return admin.ListPausesResponse(pauses=await list_pauses(self._scheduler, namespace))

    async def _audit(
        self,
        namespace: str,
        paused: bool,
        scope: wpb.PauseScope,
        name: str,
        reason: str,
        changed: bool,
    ) -> None:
        """Log the call in history's audit log (after the scheduler answered: a failure here
        fails the call, and its retry, which changes nothing more, is logged)."""
        audited = hpb.AuditPauseRequest(
            namespace=namespace,
            paused=paused,
            scope=scope,
            name=name,
            reason=reason,
            changed=changed,
        )
        await self._history.AuditPause(audited, timeout=DOWNSTREAM_TIMEOUT, metadata=vouched())

    async def _require_open(self, namespace: str, workflow_id: str) -> None:
        """NOT_FOUND for an unknown id, FAILED_PRECONDITION for a closed run: a pause of a
        closed run would hold nothing and mislead."""
        asked = api.DescribeWorkflowRequest(workflow_id=workflow_id, namespace=namespace)
        cell = await self._router.locate(RUN, namespace, workflow_id)
        described: hpb.DescribeWorkflowResponse = await cell.call(
            cell.history.DescribeWorkflow(
                hpb.DescribeWorkflowRequest(request=asked),
                timeout=DOWNSTREAM_TIMEOUT,
                metadata=vouched(),
            )
        )
        status = described.response.workflow.status
        if status not in OPEN_STATUSES:
            raise errors.failed_precondition(
                Reason.WORKFLOW_CLOSED,
                f"workflow {workflow_id[:100]!r} is closed "
                f"({wpb.WorkflowStatus.Name(status).removeprefix('WORKFLOW_STATUS_')}): there is "
                "nothing to pause",
            )
