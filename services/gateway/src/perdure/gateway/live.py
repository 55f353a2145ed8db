"""The public API's pushed reads: WatchWorkflow, GetWorkflowResult and ReadStream, validated
and handed to history, which pushes what is committed (history's watch_api.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.stream_names import stream_name
from perdure.gateway import validate
from perdure.gateway.cells import RUN, Router
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]
ANSWER_MARGIN = 10.0  # seconds history has to answer a long poll after its wait ran out


class LiveCalls:
    """WorkflowService's streams and long poll."""

    _router: Router
    _callers: Any  # handlers.Callers

    @errors.streaming
    async def WatchWorkflow(
        self, request: api.WatchWorkflowRequest, context: Context
    ) -> AsyncIterator[api.WatchWorkflowResponse]:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        validate.event_id("after_event_id", request.after_event_id)
        wrapped = hpb.WatchWorkflowRequest(request=in_namespace(request, namespace))
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        async for answer in cell.stream(cell.history.WatchWorkflow(wrapped, metadata=vouched())):
            yield answer.response

    @errors.unary
    async def GetWorkflowResult(
        self, request: api.GetWorkflowResultRequest, context: Context
    ) -> api.GetWorkflowResultResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        wait = validate.result_wait(request.wait)
        timeout = wait + ANSWER_MARGIN
        remaining = context.time_remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)  # history bounds its wait by this deadline too
        wrapped = hpb.GetWorkflowResultRequest(request=in_namespace(request, namespace))
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        answer = await cell.call(
            cell.history.GetWorkflowResult(wrapped, timeout=timeout, metadata=vouched())
        )
        response: api.GetWorkflowResultResponse = answer.response
        return response

    @errors.streaming
    async def ReadStream(
        self, request: api.ReadStreamRequest, context: Context
    ) -> AsyncIterator[api.ReadStreamResponse]:
        namespace = self._callers.admit(context, request.namespace)
        validate.workflow_id(request.workflow_id)
        validate.optional_id("run_id", request.run_id)
        stream_name(request.stream)
        if request.after_seq < 0:
            raise errors.invalid_argument(f"after_seq must be 0 or more, not {request.after_seq}")
        wrapped = hpb.ReadStreamRequest(request=in_namespace(request, namespace))
        cell = await self._router.locate(RUN, namespace, request.workflow_id)
        async for answer in cell.stream(cell.history.ReadStream(wrapped, metadata=vouched())):
            yield answer.response
