"""HistoryService's storage calls: GetStorage (storage.py), ExportWorkflow and ImportWorkflow
(run_archive.py)."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import auth, errors, namespaces
from perdure.common.reasons import Reason
from perdure.history import keys, run_archive, storage
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]

# An archive travels in one message: below gRPC's default 4 MiB limit, with room for the rest.
MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 - 64 * 1024


def archive_too_large(size: int) -> errors.ApiError:
    """An archive larger than one message carries."""
    return errors.ApiError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        Reason.MESSAGE_TOO_LARGE,
        f"the archive is {size} bytes compressed, more than the {MAX_ARCHIVE_BYTES} one call "
        "carries: archive the run with PERDURE_ARCHIVE (no size limit) instead",
    )


class StorageApi:
    """GetStorage, ExportWorkflow and ImportWorkflow, on the key ring's pool."""

    _keys: keys.KeyRing

    @errors.unary
    async def GetStorage(
        self, request: hpb.GetStorageRequest, context: Context
    ) -> hpb.GetStorageResponse:
        r = request.request
        namespace = auth.acting_namespace(r.namespace)
        async with self._keys.connection() as conn:
            answer = await storage.storage(conn, namespace, r.top or storage.DEFAULT_TOP)
        return hpb.GetStorageResponse(response=answer)

    @errors.unary
    async def ExportWorkflow(
        self, request: hpb.ExportWorkflowRequest, context: Context
    ) -> hpb.ExportWorkflowResponse:
        r = request.request
        chain = namespaces.qualify(auth.acting_namespace(r.namespace), r.workflow_id)
        async with self._keys.connection() as conn:
            key = await run_archive.run_key(conn, chain, r.run_id)
            archive, run_id, count = await run_archive.export_run(conn, key)
        if len(archive) > MAX_ARCHIVE_BYTES:
            raise archive_too_large(len(archive))
        return hpb.ExportWorkflowResponse(
            response=admin.ExportWorkflowResponse(archive=archive, run_id=run_id, event_count=count)
        )

    @errors.unary
    async def ImportWorkflow(
        self, request: hpb.ImportWorkflowRequest, context: Context
    ) -> hpb.ImportWorkflowResponse:
        r = request.request
        namespace = auth.acting_namespace(r.namespace)
        async with self._keys.connection() as conn:
            imported = await run_archive.import_run(conn, r.archive, namespace)
        return hpb.ImportWorkflowResponse(
            response=admin.ImportWorkflowResponse(
                workflow_id=imported.workflow_id,
                run_id=imported.run_id,
                event_count=imported.event_count,
                earlier_run=imported.earlier_run,
            )
        )
