"""AdminService's retention: validated here, kept by history (which deletes closed runs past
it). Reading it needs a reader key, setting it an admin key (ROLES in __main__.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors
from perdure.gateway.forwarding import vouched
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc

if TYPE_CHECKING:
    from perdure.gateway.handlers import Callers

Context = grpc.aio.ServicerContext[Any, Any]
DOWNSTREAM_TIMEOUT = 30.0


def _check(request: admin.SetRetentionRequest) -> None:
    """Exactly one of seconds, forever and use_default; seconds positive and finite."""
    given = sum((request.seconds != 0, request.forever, request.use_default))
    if given != 1:
        raise errors.invalid_argument(
            f"name exactly one of seconds, forever and use_default ({given} given)"
        )
    if request.seconds and not 0 < request.seconds < math.inf:
        raise errors.invalid_argument(
            f"seconds must be a positive number of seconds, not {request.seconds}"
        )


class RetentionAdmin:
    """GetRetention and SetRetention of the caller's namespace, as `admit` resolves it."""

    _history: hgrpc.HistoryServiceStub
    _callers: Callers

    @errors.unary
    async def GetRetention(
        self, request: admin.GetRetentionRequest, context: Context
    ) -> admin.GetRetentionResponse:
        namespace = self._callers.admit(context, request.namespace)
        scoped = admin.GetRetentionRequest(namespace=namespace)
        answer: hpb.GetRetentionResponse = await self._history.GetRetention(
            hpb.GetRetentionRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT, metadata=vouched()
        )
        return answer.response

    @errors.unary
    async def SetRetention(
        self, request: admin.SetRetentionRequest, context: Context
    ) -> admin.SetRetentionResponse:
        namespace = self._callers.admit(context, request.namespace)
        _check(request)
        scoped = admin.SetRetentionRequest()
        scoped.CopyFrom(request)
        scoped.namespace = namespace
        answer: hpb.SetRetentionResponse = await self._history.SetRetention(
            hpb.SetRetentionRequest(request=scoped), timeout=DOWNSTREAM_TIMEOUT, metadata=vouched()
        )
        return answer.response
