"""gRPC servicers of history: thin adapters from messages to the Journal."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.convert import value_to_python
from perdure.common.payload import validate_payload
from perdure.history.journal import Journal
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc

Context = grpc.aio.ServicerContext[Any, Any]


def _require_workflow_id(workflow_id: str) -> None:
    if not workflow_id:
        raise errors.invalid_argument("workflow_id is required")


def _require_fence(fence: int) -> None:
    if fence <= 0:
        raise errors.invalid_argument("fence must be the positive token of a lease")


class HistoryServicer(hgrpc.HistoryServiceServicer):
    """What the gateway asks of history, after it has validated the request."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    @errors.unary
    async def StartWorkflow(
        self, request: hpb.StartWorkflowRequest, context: Context
    ) -> hpb.StartWorkflowResponse:
        r = request.request
        _require_workflow_id(r.workflow_id)
        started, status = await self._journal.start(
            r.workflow_id, r.workflow_type, r.task_queue, value_to_python(r.input)
        )
        return hpb.StartWorkflowResponse(
            response=api.StartWorkflowResponse(
                workflow_id=r.workflow_id,
                started=started,
                status=f"WORKFLOW_STATUS_{status}",
            )
        )

    @errors.unary
    async def DescribeWorkflow(
        self, request: hpb.DescribeWorkflowRequest, context: Context
    ) -> hpb.DescribeWorkflowResponse:
        _require_workflow_id(request.request.workflow_id)
        info, steps = await self._journal.describe(request.request.workflow_id)
        return hpb.DescribeWorkflowResponse(
            response=api.DescribeWorkflowResponse(workflow=info, steps=steps)
        )

    @errors.unary
    async def GetWorkflowHistory(
        self, request: hpb.GetWorkflowHistoryRequest, context: Context
    ) -> hpb.GetWorkflowHistoryResponse:
        r = request.request
        _require_workflow_id(r.workflow_id)
        events, token = await self._journal.history_page(r.workflow_id, r.page_size, r.page_token)
        return hpb.GetWorkflowHistoryResponse(
            response=api.GetWorkflowHistoryResponse(events=events, next_page_token=token)
        )

    @errors.unary
    async def ListWorkflows(
        self, request: hpb.ListWorkflowsRequest, context: Context
    ) -> hpb.ListWorkflowsResponse:
        r = request.request
        status = (
            wf.WorkflowStatus.Name(r.status).removeprefix("WORKFLOW_STATUS_")
            if r.status != wf.WORKFLOW_STATUS_UNSPECIFIED
            else None
        )
        runs, token = await self._journal.list_page(
            status, r.workflow_type or None, r.page_size, r.page_token
        )
        return hpb.ListWorkflowsResponse(
            response=api.ListWorkflowsResponse(workflows=runs, next_page_token=token)
        )


class JournalServicer(jgrpc.JournalServiceServicer):
    """The worker protocol's journal calls, each checked against the lease's fence."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    @errors.unary
    async def LoadJournal(
        self, request: jpb.LoadJournalRequest, context: Context
    ) -> jpb.LoadJournalResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        info, events = await self._journal.load(request.workflow_id, request.fence)
        return jpb.LoadJournalResponse(workflow=info, events=events)

    @errors.unary
    async def RecordStep(
        self, request: jpb.RecordStepRequest, context: Context
    ) -> jpb.RecordStepResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        if not request.step_id or not request.step_name:
            raise errors.invalid_argument("step_id and step_name are required")
        if request.position < 0:
            raise errors.invalid_argument("position must be zero or more")
        outcome = request.WhichOneof("outcome")
        if outcome is None:
            raise errors.invalid_argument("one of output or failure is required")
        if outcome == "output":
            validate_payload("output", request.output)
        event_id = await self._journal.record_step(
            request.workflow_id,
            request.fence,
            request.step_id,
            request.step_name,
            request.position,
            max(request.attempt, 1),
            value_to_python(request.output) if outcome == "output" else None,
            request.failure if outcome == "failure" else None,
        )
        return jpb.RecordStepResponse(event_id=event_id)

    @errors.unary
    async def FinishWorkflow(
        self, request: jpb.FinishWorkflowRequest, context: Context
    ) -> jpb.FinishWorkflowResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        outcome = request.WhichOneof("outcome")
        if outcome is None:
            raise errors.invalid_argument("one of result, failure or park is required")
        if outcome == "result":
            validate_payload("result", request.result)
        value = (
            value_to_python(request.result) if outcome == "result" else getattr(request, outcome)
        )
        status = await self._journal.finish(request.workflow_id, request.fence, outcome, value)
        return jpb.FinishWorkflowResponse(status=f"WORKFLOW_STATUS_{status}")
