"""The public ApprovalService: validated here, kept and decided by history (which checks that
the caller is one of the approval's approvers: it knows whether it is escalated). With several
cells, an approval is looked for in every cell (its id names no workflow), and lists merge."""

from __future__ import annotations

import asyncio
import re
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import approval_service_pb2_grpc as agrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import auth, errors
from perdure.common.reasons import Reason
from perdure.common.text import require_storable
from perdure.gateway import merge, validate
from perdure.gateway.cells import RUN, Cell, Router
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.gateway.handlers import DOWNSTREAM_TIMEOUT, Callers
from perdure.internal.history.v1 import approval_service_pb2 as hpb

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

    def __init__(self, router: Router, callers: Callers) -> None:
        self._router = router
        self._callers = callers

    async def _forward(
        self, rpc: str, wrapped: Message, answer_type: type[Answer], cell: Cell | None = None
    ) -> Answer:
        cell = cell or self._router.home
        answer = await cell.call(
            getattr(cell.approvals, rpc)(wrapped, timeout=DOWNSTREAM_TIMEOUT, metadata=vouched())
        )
        response = answer.response
        assert isinstance(response, answer_type)
        return response

    async def _cell_of(self, namespace: str, approval: str) -> Cell:
        """The cell holding the approval: the only one, or the one of several that has it.
        A cell that does not answer fails the call (naming it) only when no other has it."""
        if self._router.single:
            return self._router.home
        asked = hpb.GetApprovalRequest(
            request=apb.GetApprovalRequest(namespace=namespace, approval_id=approval)
        )

        async def has(cell: Cell) -> bool:
            try:
                await self._forward("GetApproval", asked, apb.GetApprovalResponse, cell)
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    return False
                raise
            return True

        cells = self._router.cells
        answers = await asyncio.gather(*(has(cell) for cell in cells), return_exceptions=True)
        for cell, answer in zip(cells, answers, strict=True):
            if answer is True:
                return cell
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        raise errors.not_found(
            Reason.APPROVAL_NOT_FOUND,
            f"no approval {approval[:100]!r} in namespace {namespace!r} (in any cell)",
        )

    @errors.unary
    async def ListApprovals(
        self, request: apb.ListApprovalsRequest, context: Context
    ) -> apb.ListApprovalsResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.page_size(request.page_size)
        if self._router.single or request.workflow_id:
            validate.page_token(request.page_token)
        if request.status not in wf.ApprovalStatus.values():
            raise errors.invalid_argument(f"status {request.status} is not an ApprovalStatus")
        if request.workflow_id:
            validate.workflow_id(request.workflow_id)
        scoped = in_namespace(request, namespace)
        if self._router.single or request.workflow_id:
            cell = await self._router.locate(RUN, namespace, request.workflow_id or "")
            wrapped = hpb.ListApprovalsRequest(request=scoped)
            return await self._forward("ListApprovals", wrapped, apb.ListApprovalsResponse, cell)

        async def page(cell: Cell, token: str, size: int) -> tuple[list[wf.Approval], str]:
            asked = apb.ListApprovalsRequest()
            asked.CopyFrom(scoped)
            asked.page_token, asked.page_size = token, size
            answer = await self._forward(
                "ListApprovals",
                hpb.ListApprovalsRequest(request=asked),
                apb.ListApprovalsResponse,
                cell,
            )
            return list(answer.approvals), answer.next_page_token

        approvals, token = await merge.merged_page(
            self._router.cells,
            request.page_token,
            request.page_size,
            page,
            lambda approval: -approval.create_time.ToNanoseconds(),  # newest first
        )
        return apb.ListApprovalsResponse(approvals=approvals, next_page_token=token)

    @errors.unary
    async def GetApproval(
        self, request: apb.GetApprovalRequest, context: Context
    ) -> apb.GetApprovalResponse:
        namespace = self._callers.admit(context, request.namespace)
        approval_id(request.approval_id)
        cell = await self._cell_of(namespace, request.approval_id)
        wrapped = hpb.GetApprovalRequest(request=in_namespace(request, namespace))
        return await self._forward("GetApproval", wrapped, apb.GetApprovalResponse, cell)

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
        cell = await self._cell_of(namespace, request.approval_id)
        return await self._forward("DecideApproval", wrapped, apb.DecideApprovalResponse, cell)
