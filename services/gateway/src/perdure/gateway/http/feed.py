"""A run's events as they are journaled, as Server-Sent Events (docs/http_api.md)."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
from aiohttp import web

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.gateway.http.convert import invalid_json, rpc_error_body, to_json
from perdure.gateway.http.routes import CALL_TIMEOUT_SECONDS, Handler, forwarded

PATH = "/v1/workflows/{workflow_id}/events"
# How often an idle feed asks for new events, and sends a comment to keep proxies from
# closing it.
POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0
PAGE_SIZE = 500
OPEN = (wf.WORKFLOW_STATUS_RUNNING, wf.WORKFLOW_STATUS_WAITING)
# A closed run journals nothing after its closing event: the feed ends there.
CLOSING = frozenset(
    {
        wf.EVENT_TYPE_WORKFLOW_COMPLETED,
        wf.EVENT_TYPE_WORKFLOW_FAILED,
        wf.EVENT_TYPE_WORKFLOW_CANCELLED,
        wf.EVENT_TYPE_WORKFLOW_TERMINATED,
        wf.EVENT_TYPE_WORKFLOW_PARKED,
    }
)


def after_event_id(request: web.Request) -> int:
    """Where the feed resumes: the Last-Event-ID header (an EventSource reconnecting), else
    ?after_event_id=, else the start."""
    raw = request.headers.get("Last-Event-ID") or request.query.get("after_event_id") or "0"
    if not raw.isdigit():
        raise invalid_json(f"the event id to resume after must be a number, not {raw[:40]!r}")
    return int(raw)


def feed_handler(stub: api_grpc.WorkflowServiceStub) -> Handler:
    """The handler of GET /v1/workflows/{workflow_id}/events."""

    async def feed(request: web.Request) -> web.StreamResponse:
        workflow_id = request.match_info["workflow_id"]
        namespace = request.query.get("namespace", "")
        metadata = forwarded(request)
        after = after_event_id(request)
        # A run that does not exist, or a key that may not read it: a plain error, not a stream.
        described = await stub.DescribeWorkflow(
            api.DescribeWorkflowRequest(workflow_id=workflow_id, namespace=namespace),
            metadata=metadata,
            timeout=CALL_TIMEOUT_SECONDS,
        )
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # nginx: pass each event on at once
            }
        )
        await response.prepare(request)
        try:
            await _follow(stub, response, described, after, metadata)
        except grpc.aio.AioRpcError as error:  # the stream has begun: the error is an event
            await response.write(_message("error", rpc_error_body(error)))
        except ConnectionResetError:
            return response  # the client left
        await response.write_eof()
        return response

    return feed


def _message(event: str, data: object, event_id: int | None = None) -> bytes:
    """One Server-Sent Events message (its data on one line: JSON has no raw newlines)."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {event}", f"data: {json.dumps(data, separators=(',', ':'))}"]
    return ("\n".join(lines) + "\n\n").encode()


async def _follow(
    stub: api_grpc.WorkflowServiceStub,
    response: web.StreamResponse,
    described: api.DescribeWorkflowResponse,
    after: int,
    metadata: tuple[tuple[str, str], ...],
) -> None:
    """Send the run's events after `after` as they come, then `end` once it is closed."""
    run = described.workflow
    request = api.GetWorkflowHistoryRequest(
        workflow_id=run.workflow_id, namespace=run.namespace, page_size=PAGE_SIZE
    )
    ended = run.status not in OPEN
    quiet_since = time.monotonic()
    while True:
        request.after_event_id = after
        page = await stub.GetWorkflowHistory(
            request, metadata=metadata, timeout=CALL_TIMEOUT_SECONDS
        )
        for event in page.events:
            await response.write(_message("history", to_json(event), event.event_id))
            after = event.event_id
            ended = ended or event.event_type in CLOSING
        if page.next_page_token:
            continue  # more at once
        if ended:
            break
        if page.events:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
            await response.write(b": keepalive\n\n")
            quiet_since = time.monotonic()
        await asyncio.sleep(POLL_SECONDS)
    closed = await stub.DescribeWorkflow(
        api.DescribeWorkflowRequest(workflow_id=run.workflow_id, namespace=run.namespace),
        metadata=metadata,
        timeout=CALL_TIMEOUT_SECONDS,
    )
    status = wf.WorkflowStatus.Name(closed.workflow.status)
    await response.write(_message("end", {"status": status}))
