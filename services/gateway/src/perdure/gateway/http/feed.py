"""A run's events as they are journaled, as Server-Sent Events (docs/http_api.md): the HTTP
face of WatchWorkflow, pushed, never polled."""

from __future__ import annotations

from aiohttp import web

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.common.limits import OpenCap
from perdure.gateway.http.convert import to_json
from perdure.gateway.http.routes import Handler, forwarded
from perdure.gateway.http.sse import message, relay, resume_cursor

PATH = "/v1/workflows/{workflow_id}/events"


def feed_handler(stub: api_grpc.WorkflowServiceStub, feeds: OpenCap) -> Handler:
    """The handler of GET /v1/workflows/{workflow_id}/events."""

    async def feed(request: web.Request) -> web.StreamResponse:
        watch = api.WatchWorkflowRequest(
            workflow_id=request.match_info["workflow_id"],
            namespace=request.query.get("namespace", ""),
            run_id=request.query.get("run_id", ""),
            after_event_id=resume_cursor(request, "after_event_id"),
        )
        call = stub.WatchWorkflow(watch, metadata=forwarded(request))
        return await relay(request, feeds, call, _Writer().write)

    return feed


class _Writer:
    """Events `history` (a HistoryEvent, its id the event id), `status` when the run's status
    changed since the feed began (its WorkflowInfo), and last `end` with the closing status."""

    def __init__(self) -> None:
        self._status: int | None = None  # the status the watch began with: no event

    async def write(self, response: web.StreamResponse, answer: api.WatchWorkflowResponse) -> None:
        for event in answer.events:
            await response.write(message("history", to_json(event), event.event_id))
        if not answer.HasField("workflow"):
            return
        status = wf.WorkflowStatus.Name(answer.workflow.status)
        if answer.closed:
            await response.write(message("end", {"status": status}))
        elif self._status is None:
            self._status = answer.workflow.status
        elif answer.workflow.status != self._status:
            self._status = answer.workflow.status
            await response.write(
                message("status", {"status": status, "workflow": to_json(answer.workflow)})
            )
