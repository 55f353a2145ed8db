"""AdminService's retention as history serves it: a namespace's own retention
(namespace_retention), or PERDURE_RETENTION; setting it is audited in the same transaction."""

from __future__ import annotations

import math
from typing import Any

import grpc
from psycopg import AsyncConnection

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import auth, errors
from perdure.history import keys
from perdure.history.retention import default_retention
from perdure.history.rows import fetch_one
from perdure.history.validation import acting_key
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]

_SELECT = "SELECT seconds FROM history.namespace_retention WHERE namespace = %(namespace)s"
_UPSERT = """INSERT INTO history.namespace_retention (namespace, seconds, updated_by)
VALUES (%(namespace)s, %(seconds)s, %(key)s)
ON CONFLICT (namespace) DO UPDATE
SET seconds = EXCLUDED.seconds, updated_by = EXCLUDED.updated_by, updated_at = now()"""
_CLEAR = "DELETE FROM history.namespace_retention WHERE namespace = %(namespace)s"


def _retention(namespace: str, own: float | None) -> admin.Retention:
    seconds = default_retention() if own is None else own
    forever = math.isinf(seconds)
    return admin.Retention(
        namespace=namespace,
        seconds=0.0 if forever else seconds,
        forever=forever,
        is_default=own is None,
    )


async def _current(conn: AsyncConnection, namespace: str) -> admin.Retention:
    row = await fetch_one(conn, _SELECT, {"namespace": namespace})
    return _retention(namespace, None if row is None else float(row["seconds"]))


def _seconds(request: admin.SetRetentionRequest) -> float | None:
    """The retention a valid request sets (None: the default again)."""
    given = sum((request.seconds != 0, request.forever, request.use_default))
    if given != 1:
        raise errors.invalid_argument(
            f"name exactly one of seconds, forever and use_default ({given} given)"
        )
    if request.use_default:
        return None
    if request.forever:
        return math.inf
    if not 0 < request.seconds < math.inf:
        raise errors.invalid_argument(
            f"seconds must be a positive number of seconds, not {request.seconds}"
        )
    return request.seconds


class RetentionApi:
    """HistoryService's GetRetention and SetRetention."""

    _keys: keys.KeyRing

    @errors.unary
    async def GetRetention(
        self, request: hpb.GetRetentionRequest, context: Context
    ) -> hpb.GetRetentionResponse:
        namespace = auth.acting_namespace(request.request.namespace)
        async with self._keys.connection() as conn:
            current = await _current(conn, namespace)
        return hpb.GetRetentionResponse(response=admin.GetRetentionResponse(retention=current))

    @errors.unary
    async def SetRetention(
        self, request: hpb.SetRetentionRequest, context: Context
    ) -> hpb.SetRetentionResponse:
        r = request.request
        namespace = auth.acting_namespace(r.namespace)
        seconds = _seconds(r)
        key = acting_key()
        params = {"namespace": namespace, "seconds": seconds, "key": key}
        async with self._keys.connection() as conn, conn.transaction():
            await conn.execute(_CLEAR if seconds is None else _UPSERT, params)
            current = await _current(conn, namespace)
            details = {
                "seconds": current.seconds,
                "forever": current.forever,
                "is_default": current.is_default,
            }
            await keys.audit(conn, key, namespace, "RETENTION_SET", namespace, details)
        return hpb.SetRetentionResponse(response=admin.SetRetentionResponse(retention=current))
