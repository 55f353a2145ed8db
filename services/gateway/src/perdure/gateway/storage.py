"""AdminService's storage calls: GetStorage, ExportWorkflow and ImportWorkflow, validated here
and answered by history (storage.py, run_archive.py there). With several cells, an export
goes to its run's cell; an import and the storage figures to the first cell, which the
directory then names as the imported run's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors
from perdure.gateway import validate
from perdure.gateway.cells import RUN
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc

if TYPE_CHECKING:
    from perdure.gateway.cells import Router
    from perdure.gateway.handlers import Callers

Context = grpc.aio.ServicerContext[Any, Any]
MAX_TOP = 100
# A storage scan or an archive of a long journal takes longer than a workflow call.
TIMEOUT = 120.0


class StorageAdmin:
    """GetStorage (reader), ExportWorkflow (reader) and ImportWorkflow (admin)."""

    _history: hgrpc.HistoryServiceStub
    _router: Router
    _callers: Callers

    @errors.unary
    async def GetStorage(
        self, request: admin.GetStorageRequest, context: Context
    ) -> admin.GetStorageResponse:
        namespace = self._callers.admit(context, request.namespace)
        if not 0 <= request.top <= MAX_TOP:
            raise errors.invalid_argument(f"top must be between 0 and {MAX_TOP}")
        scoped = hpb.GetStorageRequest(request=in_namespace(request, namespace))
        answer: hpb.GetStorageResponse = await self._history.GetStorage(
            scoped, timeout=TIMEOUT, metadata=vouched()
        )
        return answer.response

    @errors.unary
    async def ExportWorkflow(
        self, request: admin.ExportWorkflowRequest, context: Context
    ) -> admin.ExportWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        scoped = hpb.ExportWorkflowRequest(request=in_namespace(request, namespace))
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        answer: hpb.ExportWorkflowResponse = await cell.call(
            cell.history.ExportWorkflow(scoped, timeout=TIMEOUT, metadata=vouched())
        )
        return answer.response

    @errors.unary
    async def ImportWorkflow(
        self, request: admin.ImportWorkflowRequest, context: Context
    ) -> admin.ImportWorkflowResponse:
        namespace = self._callers.admit(context, request.namespace)
        if not request.archive:
            raise errors.invalid_argument(
                "archive is required: the bytes of a file `perdure workflow export` wrote"
            )
        scoped = hpb.ImportWorkflowRequest(request=in_namespace(request, namespace))
        home = self._router.home
        answer: hpb.ImportWorkflowResponse = await home.call(
            home.history.ImportWorkflow(scoped, timeout=TIMEOUT, metadata=vouched())
        )
        await self._router.record(RUN, namespace, answer.response.workflow_id, home)
        return answer.response
