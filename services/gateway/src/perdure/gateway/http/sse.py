"""Server-Sent Events, as every feed of the HTTP API writes them (feed.py: a run's events;
stream_feed.py: a run's stream): a pushed gRPC stream relayed message by message, a resume
cursor from Last-Event-ID, keepalives, the caller's cap of open feeds, and a failure after
the stream began sent as an `error` event."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from aiohttp import web

from perdure.common.auth import auth_enabled, bearer_token, parse_token
from perdure.common.limits import OpenCap
from perdure.common.reasons import Reason
from perdure.gateway.http.convert import dumps, invalid_json, rpc_error_body
from perdure.gateway.http.routes import forwarded

# An idle feed sends a comment this often to keep proxies from closing it, and looks this
# often whether its client left (the pushed call then ends at once and frees its place).
KEEPALIVE_SECONDS = 15.0
CLIENT_CHECK_SECONDS = 1.0
DEFAULT_FEEDS_PER_KEY = 16
# A cursor: what an int64 holds, in ASCII digits.
_CURSOR = re.compile(r"[0-9]{1,19}")
MAX_CURSOR = 2**63 - 1


def resume_cursor(request: web.Request, parameter: str) -> int:
    """Where a feed resumes: the Last-Event-ID header (an EventSource reconnecting), else the
    query `parameter`, else the start."""
    raw = request.headers.get("Last-Event-ID") or request.query.get(parameter) or "0"
    if not _CURSOR.fullmatch(raw) or int(raw) > MAX_CURSOR:
        raise invalid_json(
            f"the id to resume after (Last-Event-ID or {parameter}) must be a number from 0 to "
            f"{MAX_CURSOR}, not {raw[:40]!r}{'...' if len(raw) > 40 else ''}"
        )
    return int(raw)


def open_feeds() -> OpenCap:
    """The feeds each caller may hold open (by API key, or by address without keys), of
    every kind together."""
    return OpenCap(
        "PERDURE_HTTP_FEEDS_PER_KEY",
        DEFAULT_FEEDS_PER_KEY,
        "feeds",
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


def message(event: str, data: object, event_id: int | None = None) -> bytes:
    """One Server-Sent Events message (its data on one line: JSON has no raw newlines)."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {event}", f"data: {dumps(data)}"]
    return ("\n".join(lines) + "\n\n").encode()


async def relay(
    request: web.Request,
    feeds: OpenCap,
    call: grpc.aio.UnaryStreamCall[Any, Any],
    write: Callable[[web.StreamResponse, Any], Awaitable[None]],
) -> web.StreamResponse:
    """Relay a pushed call as a feed: `write` turns each of its messages into events. An
    error before its first message (an unknown run, a key that may not read it) is a plain
    error answer, not a stream."""
    try:
        first = await call.read()
        with feeds.hold(feed_holder(request)):
            response = web.StreamResponse(
                headers={
                    "Content-Type": "text/event-stream",
                    "Cache-Control": "no-cache",
                    "X-Accel-Buffering": "no",  # nginx: pass each event on at once
                }
            )
            await response.prepare(request)
            try:
                async for answer in _pushed(request, response, call, first):
                    await write(response, answer)
            except grpc.aio.AioRpcError as error:  # the stream has begun: the error is an event
                await response.write(message("error", rpc_error_body(error)))
            except ConnectionResetError:
                return response  # the client left
            await response.write_eof()
            return response
    finally:
        call.cancel()


async def _pushed(
    request: web.Request,
    response: web.StreamResponse,
    call: grpc.aio.UnaryStreamCall[Any, Any],
    first: Any,
) -> AsyncIterator[Any]:
    """The call's messages from `first` on, with a keepalive after each quiet while; raises
    ConnectionResetError once the client left."""
    answer = first
    quiet = 0.0
    while answer is not grpc.aio.EOF:
        yield answer
        reading = asyncio.ensure_future(call.read())
        try:
            while not reading.done():
                await asyncio.wait({reading}, timeout=CLIENT_CHECK_SECONDS)
                if reading.done():
                    break
                if request.transport is None or request.transport.is_closing():
                    raise ConnectionResetError("the client left")
                quiet += CLIENT_CHECK_SECONDS
                if quiet >= KEEPALIVE_SECONDS:
                    await response.write(b": keepalive\n\n")
                    quiet = 0.0
        finally:
            if not reading.done():
                reading.cancel()
        answer = reading.result()
        quiet = 0.0
