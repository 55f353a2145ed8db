"""The public ApprovalService as history serves it (the gateway validated the request first,
names the namespace it acts in and who calls)."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.common import auth, errors
from perdure.history.journal import Journal
from perdure.internal.history.v1 import approval_service_pb2 as hpb
from perdure.internal.history.v1 import approval_service_pb2_grpc as hgrpc

Context = grpc.aio.ServicerContext[Any, Any]


class ApprovalServicer(hgrpc.HistoryApprovalServiceServicer):
    """HistoryApprovalService: each call in the namespace the gateway vouches for."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    @errors.unary
    async def ListApprovals(
        self, request: hpb.ListApprovalsRequest, context: Context
    ) -> hpb.ListApprovalsResponse:
        r = request.request
        listed = await self._journal.list_approvals(r, auth.acting_namespace(r.namespace))
        return hpb.ListApprovalsResponse(response=listed)

    @errors.unary
    async def GetApproval(
        self, request: hpb.GetApprovalRequest, context: Context
    ) -> hpb.GetApprovalResponse:
        r = request.request
        approval = await self._journal.get_approval(
            auth.acting_namespace(r.namespace), r.approval_id
        )
        return hpb.GetApprovalResponse(response=apb.GetApprovalResponse(approval=approval))

    @errors.unary
    async def DecideApproval(
        self, request: hpb.DecideApprovalRequest, context: Context
    ) -> hpb.DecideApprovalResponse:
        r = request.request
        approval = await self._journal.decide_approval(
            r, auth.acting_namespace(r.namespace), request.key_id, request.role
        )
        return hpb.DecideApprovalResponse(response=apb.DecideApprovalResponse(approval=approval))
