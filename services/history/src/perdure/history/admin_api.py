"""The admin API as history serves it: authenticating API keys for the gateway, creating,
revoking and listing keys, and the audit log."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import auth, errors
from perdure.common.text import require_storable
from perdure.history import keys
from perdure.history.reads import page_size
from perdure.history.validation import acting_key
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]


class AdminApi:
    """HistoryService's calls about API keys and the audit log."""

    _keys: keys.KeyRing

    @errors.unary
    async def Authenticate(
        self, request: hpb.AuthenticateRequest, context: Context
    ) -> hpb.AuthenticateResponse:
        principal = await self._keys.authenticate(request.token)
        return hpb.AuthenticateResponse(
            key_id=principal.key_id,
            namespace=principal.namespace,
            role=principal.role,  # type: ignore[arg-type]
            task_queues=principal.task_queues,
        )

    @errors.unary
    async def CreateApiKey(
        self, request: hpb.CreateApiKeyRequest, context: Context
    ) -> hpb.CreateApiKeyResponse:
        r = request.request
        async with self._keys.connection() as conn:
            key, token = await keys.create(
                conn,
                auth.acting_namespace(""),
                keys.role_of(r.role),
                list(r.task_queues),
                r.name,
                acting_key(),
            )
        return hpb.CreateApiKeyResponse(response=admin.CreateApiKeyResponse(key=key, token=token))

    @errors.unary
    async def RevokeApiKey(
        self, request: hpb.RevokeApiKeyRequest, context: Context
    ) -> hpb.RevokeApiKeyResponse:
        r = request.request
        if not r.key_id:
            raise errors.invalid_argument("key_id is required")
        require_storable("key_id", r.key_id)
        async with self._keys.connection() as conn:
            revoked = await keys.revoke(conn, auth.acting_namespace(""), r.key_id, acting_key())
        self._keys.forget(r.key_id)
        return hpb.RevokeApiKeyResponse(response=admin.RevokeApiKeyResponse(revoked=revoked))

    @errors.unary
    async def ListApiKeys(
        self, request: hpb.ListApiKeysRequest, context: Context
    ) -> hpb.ListApiKeysResponse:
        namespace = auth.acting_namespace("")
        async with self._keys.connection() as conn:
            listed = await keys.listed(conn, namespace, request.request.include_revoked)
        return hpb.ListApiKeysResponse(response=admin.ListApiKeysResponse(keys=listed))

    @errors.unary
    async def AuditPause(
        self, request: hpb.AuditPauseRequest, context: Context
    ) -> hpb.AuditPauseResponse:
        require_storable("name", request.name)
        require_storable("reason", request.reason)
        details = {
            "scope": wf.PauseScope.Name(request.scope),
            "reason": request.reason,
            "changed": request.changed,
        }
        async with self._keys.connection() as conn:
            await keys.audit(
                conn,
                acting_key(),
                auth.acting_namespace(request.namespace),
                "PAUSED" if request.paused else "UNPAUSED",
                request.name,
                details,
            )
        return hpb.AuditPauseResponse()

    @errors.unary
    async def ListAuditEvents(
        self, request: hpb.ListAuditEventsRequest, context: Context
    ) -> hpb.ListAuditEventsResponse:
        r = request.request
        if not 0 <= r.page_size <= 1000:
            raise errors.invalid_argument("page_size must be between 0 and 1000")
        async with self._keys.connection() as conn:
            events, token = await keys.audit_page(
                conn,
                auth.acting_namespace(""),
                page_size(r.page_size),
                r.page_token,
            )
        return hpb.ListAuditEventsResponse(
            response=admin.ListAuditEventsResponse(events=events, next_page_token=token)
        )
