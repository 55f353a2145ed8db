"""What a request with a body must pass before its body is read, cheapest first: the size it
declares, then its API key; then the body is read in chunks, never past its route's cap.

Converting JSON to a request message runs on the process's event loop, which the gateway's gRPC
port shares: an anonymous caller must not make it do that, nor any caller with more bytes than
its route can use.
"""

from __future__ import annotations

import grpc
from aiohttp import hdrs, web
from google.protobuf.message import Message

from perdure.common.auth import auth_enabled
from perdure.common.payload import MAX_PAYLOAD_BYTES
from perdure.common.reasons import Reason
from perdure.gateway.http.convert import HttpError

# A request's fields besides its payloads (ids, names, a reason, a comment).
ENVELOPE_BYTES = 64 * 1024
PROBE_TIMEOUT_SECONDS = 10.0
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def body_cap(payloads: int) -> int:
    """The most bytes a body with up to `payloads` JSON payloads may have."""
    return payloads * MAX_PAYLOAD_BYTES + ENVELOPE_BYTES


def body_too_large(cap: int, size: str) -> HttpError:
    """413, naming the cap."""
    return HttpError(
        413,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        Reason.BODY_TOO_LARGE,
        f"the body {size}; this route takes at most {cap} bytes (a payload may be up to "
        f"{MAX_PAYLOAD_BYTES} bytes, plus {ENVELOPE_BYTES} for the rest of the request)",
    )


def refuse_declared_size(request: web.Request, cap: int) -> None:
    """413 for a Content-Length over the cap, before anything else is done."""
    length = request.content_length
    if length is not None and length > cap:
        raise body_too_large(cap, f"is {length} bytes (Content-Length)")


async def require_key(
    request: web.Request,
    method: grpc.aio.UnaryUnaryMultiCallable[Message, Message],
    empty: Message,
    metadata: tuple[tuple[str, str], ...],
) -> None:
    """Refuse a caller whose key may not call `method` (missing, invalid, revoked, a role
    too low, over its rate), before its body is read.

    The check is the call itself with an empty request: the gateway's interceptor checks the
    key and the role of exactly that method, then the method refuses the empty request
    (INVALID_ARGUMENT) before it reads or writes anything. Any other refusal is the caller's.
    """
    if not auth_enabled():
        return
    try:
        await method(empty, metadata=metadata, timeout=PROBE_TIMEOUT_SECONDS)
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
            raise


async def defer_continue(request: web.Request) -> None:
    """The routes' `Expect: 100-continue` handler: nothing yet. `read_body` says 100 Continue
    once the key has passed, so a refused client never sends its body at all."""


async def read_body(request: web.Request, cap: int) -> bytes:
    """The body, read chunk by chunk (chunked bodies declare no length): 413 as soon as it
    passes `cap`, with the rest left unread."""
    if request.headers.get(hdrs.EXPECT, "").lower() == "100-continue":
        await request.writer.write(_CONTINUE)
    body = bytearray()
    while chunk := await request.content.readany():
        body += chunk
        if len(body) > cap:
            raise body_too_large(cap, f"is more than {cap} bytes")
    return bytes(body)
