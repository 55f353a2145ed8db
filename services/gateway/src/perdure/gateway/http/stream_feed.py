"""A run's stream (the chunks its steps emit), as Server-Sent Events (docs/http_api.md): the
HTTP face of ReadStream."""

from __future__ import annotations

from aiohttp import web

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.common.limits import OpenCap
from perdure.gateway.http.convert import invalid_json, to_json
from perdure.gateway.http.routes import Handler, forwarded
from perdure.gateway.http.sse import message, relay, resume_cursor

PATH = "/v1/workflows/{workflow_id}/streams/{stream}"
QUERY = frozenset({"namespace", "run_id", "after_seq", "follow"})


def stream_feed_handler(stub: api_grpc.WorkflowServiceStub, feeds: OpenCap) -> Handler:
    """The handler of GET /v1/workflows/{workflow_id}/streams/{stream}."""

    async def stream_feed(request: web.Request) -> web.StreamResponse:
        unknown = sorted(set(request.query) - QUERY)
        if unknown:
            raise invalid_json(f"unknown query parameter {unknown[0]!r}")
        follow = request.query.get("follow", "true")
        if follow not in ("true", "false"):
            raise invalid_json(f"query parameter 'follow' must be true or false, not {follow!r}")
        read = api.ReadStreamRequest(
            workflow_id=request.match_info["workflow_id"],
            namespace=request.query.get("namespace", ""),
            run_id=request.query.get("run_id", ""),
            stream=request.match_info["stream"],
            after_seq=resume_cursor(request, "after_seq"),
            follow=follow == "true",
        )
        call = stub.ReadStream(read, metadata=forwarded(request))
        return await relay(request, feeds, call, _write)

    return stream_feed


async def _write(response: web.StreamResponse, answer: api.ReadStreamResponse) -> None:
    """Events `frame` (a StreamFrame, its id the frame's seq), and last `end` with the run's
    closing status once the run is closed and every frame is sent (followed feeds only)."""
    for frame in answer.frames:
        await response.write(message("frame", to_json(frame), frame.seq))
    if answer.end:
        await response.write(message("end", {"status": wf.WorkflowStatus.Name(answer.status)}))
