"""A run's events as they are journaled, as Server-Sent Events (docs/http_api.md)."""

from __future__ import annotations

import asyncio
import re
import time

import grpc
from aiohttp import web

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.common.auth import auth_enabled, bearer_token, parse_token
from perdure.common.limits import OpenCap
from perdure.common.reasons import Reason
from perdure.gateway.http.convert import dumps, invalid_json, rpc_error_body, to_json
from perdure.gateway.http.routes import CALL_TIMEOUT_SECONDS, Handler, forwarded

PATH = "/v1/workflows/{workflow_id}/events"
# How often an idle feed asks for new events, and sends a comment to keep proxies from
# closing it.
POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0
PAGE_SIZE = 500
DEFAULT_FEEDS_PER_KEY = 16
# An event id: what an int64 holds, in ASCII digits.
_EVENT_ID = re.compile(r"[0-9]{1,19}")
MAX_EVENT_ID = 2**63 - 1
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
    if not _EVENT_ID.fullmatch(raw) or int(raw) > MAX_EVENT_ID:
        raise invalid_json(
            f"the event id to resume after (Last-Event-ID or after_event_id) must be a number "
            f"from 0 to {MAX_EVENT_ID}, not {raw[:40]!r}{'...' if len(raw) > 40 else ''}"
        )
    return int(raw)


def open_feeds() -> OpenCap:
    """The feeds each caller may hold open (by API key, or by address without keys): each
    feed keeps asking for its run's events."""
    return OpenCap(
        "PERDURE_HTTP_FEEDS_PER_KEY",
        DEFAULT_FEEDS_PER_KEY,
        "event feeds",
        Reason.TOO_MANY_FEEDS,
        "close one first",
    )


def feed_holder(request: web.Request) -> str:
    """Who a feed counts against: its API key (already verified by the feed's first call), or
    the client's address when keys are off."""
    token = bearer_token(forwarded(request)) if auth_enabled() else None
    if token is None:
        return f"address {request.remote or 'unknown'}"
    return f"API key {parse_token(token)[0]}"


def feed_handler(stub: api_grpc.WorkflowServiceStub, feeds: OpenCap) -> Handler:
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
        with feeds.hold(feed_holder(request)):
            return await _stream(request, stub, described, after, metadata)

    return feed


async def _stream(
    request: web.Request,
    stub: api_grpc.WorkflowServiceStub,
    described: api.DescribeWorkflowResponse,
    after: int,
    metadata: tuple[tuple[str, str], ...],
) -> web.StreamResponse:
    """The stream itself: the run's events, then `end`, or an `error` event if a call fails."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: pass each event on at once
        }
    )
    await response.prepare(request)
    try:
        await _follow(stub, request, response, described, after, metadata)
    except grpc.aio.AioRpcError as error:  # the stream has begun: the error is an event
        await response.write(_message("error", rpc_error_body(error)))
    except ConnectionResetError:
        return response  # the client left
    await response.write_eof()
    return response


def _message(event: str, data: object, event_id: int | None = None) -> bytes:
    """One Server-Sent Events message (its data on one line: JSON has no raw newlines)."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {event}", f"data: {dumps(data)}"]
    return ("\n".join(lines) + "\n\n").encode()


async def _follow(
    stub: api_grpc.WorkflowServiceStub,
    request: web.Request,
    response: web.StreamResponse,
    described: api.DescribeWorkflowResponse,
    after: int,
    metadata: tuple[tuple[str, str], ...],
) -> None:
    """Send the run's events after `after` as they come, then `end` once it is closed."""
    run = described.workflow
    reading = api.GetWorkflowHistoryRequest(
        workflow_id=run.workflow_id, namespace=run.namespace, page_size=PAGE_SIZE
    )
    ended = run.status not in OPEN
    quiet_since = time.monotonic()
    while True:
        if _client_left(request):
            raise ConnectionResetError("the client left")
        reading.after_event_id = after
        page = await stub.GetWorkflowHistory(
            reading, metadata=metadata, timeout=CALL_TIMEOUT_SECONDS
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


def _client_left(request: web.Request) -> bool:
    """Whether the client closed its connection: seen before each poll, not only at the next
    write, so a feed nobody reads stops asking for events and frees its place at once."""
    transport = request.transport
    return transport is None or transport.is_closing()
