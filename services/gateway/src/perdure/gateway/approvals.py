"""The public ApprovalService: validated here, kept and decided by history (which checks that
the caller is one of the approval's approvers: it knows whether it is escalated)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import approval_service_pb2_grpc as agrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import auth, errors
from perdure.common.text import require_storable
from perdure.gateway import validate
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.gateway.handlers import DOWNSTREAM_TIMEOUT, Callers
from perdure.internal.history.v1 import approval_service_pb2 as hpb
from perdure.internal.history.v1 import approval_service_pb2_grpc as hgrpc

Context = grpc.aio.ServicerContext[Any, Any]
Answer = TypeVar("Answer", bound=Message)
MAX_APPROVAL_ID_LENGTH = 200
MAX_DECIDER_LENGTH = 200
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


def approval_id(value: str) -> None:
    if not value:
        raise errors.invalid_argument("approval_id is required")
    if len(value) > MAX_APPROVAL_ID_LENGTH:
        raise errors.invalid_argument(
            f"approval_id is {len(value)} characters long; the limit is {MAX_APPROVAL_ID_LENGTH}"
        )
    require_storable("approval_id", value)


class ApprovalServicer(agrpc.ApprovalServiceServicer):
    """Validates every request and answers bad input before history is asked."""

    def __init__(self, history: hgrpc.HistoryApprovalServiceStub, callers: Callers) -> None:
        self._history = history
        self._callers = callers

    async def _forward(self, rpc: str, wrapped: Message, answer_type: type[Answer]) -> Answer:
        answer = await getattr(self._history, rpc)(
            wrapped, timeout=DOWNSTREAM_TIMEOUT, metadata=vouched()
        )
        response = answer.response
        assert isinstance(response, answer_type)
        return response

    @errors.unary
    async def ListApprovals(
        self, request: apb.ListApprovalsRequest, context: Context
    ) -> apb.ListApprovalsResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.page_size(request.page_size)
        validate.page_token(request.page_token)
        if request.status not in wf.ApprovalStatus.values():
            raise errors.invalid_argument(f"status {request.status} is not an ApprovalStatus")
        if request.workflow_id:
            validate.workflow_id(request.workflow_id)
        wrapped = hpb.ListApprovalsRequest(request=in_namespace(request, namespace))
        return await self._forward("ListApprovals", wrapped, apb.ListApprovalsResponse)

    @errors.unary
    async def GetApproval(
        self, request: apb.GetApprovalRequest, context: Context
    ) -> apb.GetApprovalResponse:
        namespace = self._callers.admit(context, request.namespace)
        approval_id(request.approval_id)
        wrapped = hpb.GetApprovalRequest(request=in_namespace(request, namespace))
        return await self._forward("GetApproval", wrapped, apb.GetApprovalResponse)

    @errors.unary
    async def DecideApproval(
        self, request: apb.DecideApprovalRequest, context: Context
    ) -> apb.DecideApprovalResponse:
        namespace = self._callers.admit(context, request.namespace)
        approval_id(request.approval_id)
        if not _SHA256_HEX.fullmatch(request.details_sha256):
            raise errors.invalid_argument(
                "details_sha256 is required: the 64 hex digits of Approval.details_sha256 as "
                "the decider saw it (GetApproval)"
            )
        validate.reason(request.reason)
        principal = auth.current_principal.get()
        if len(request.decided_by) > MAX_DECIDER_LENGTH:
            raise errors.invalid_argument(
                f"decided_by is at most {MAX_DECIDER_LENGTH} characters long"
            )
        require_storable("decided_by", request.decided_by)
        if principal is not None and request.decided_by not in ("", principal.key_id):
            raise errors.invalid_argument(
                "decided_by names who decides only with authentication off: with keys it is "
                f"the caller's key ({principal.key_id}); leave it empty"
            )
        wrapped = hpb.DecideApprovalRequest(
            request=in_namespace(request, namespace),
            key_id=principal.key_id if principal is not None else "",
            role=principal.role if principal is not None else 0,
        )
        return await self._forward("DecideApproval", wrapped, apb.DecideApprovalResponse)
