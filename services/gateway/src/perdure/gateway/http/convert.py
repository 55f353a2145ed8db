"""JSON in and out of the API's messages, and gRPC statuses as HTTP errors."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from perdure.common.errors import ApiError, reason_of
from perdure.common.payload import MAX_PAYLOAD_DEPTH
from perdure.common.reasons import Reason
from perdure.gateway.http import payloads

# The HTTP status of each gRPC code, as google.rpc.Code documents it.
HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

# How many levels of arrays and objects a body may have: a payload's own limit and the request
# around it. Deeper bodies are refused before they are converted, with one message however deep
# they go; shallower ones stay within what protobuf decoders accept, so that an invalid payload
# is named by the payload's own check.
MAX_BODY_DEPTH = MAX_PAYLOAD_DEPTH + 2

M = TypeVar("M", bound=Message)


class HttpError(ApiError):
    """An error of the HTTP layer itself, whose HTTP status is not its gRPC code's (413 for a
    body over its route's cap)."""

    def __init__(self, status: int, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(code, reason, message)
        self.status = status


def invalid_json(message: str) -> ApiError:
    """A body or parameter that does not fit the request message."""
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, Reason.INVALID_JSON, message)


def to_json(message: Message) -> dict[str, Any]:
    """A message in the proto3 JSON mapping, with .proto field names and every field that has
    no presence (scalars, lists, maps) printed even when unset; each payload as its own JSON
    text (see payloads.shown; write the result with `dumps`)."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    payloads.show(message, data)
    return data


def from_json(value: Any, message: M) -> M:
    """Fill `message` from JSON decoded by decode_body; ApiError (400) naming what does not
    fit. Each payload field takes any JSON value, kept exactly (see payloads.taken)."""
    if not isinstance(value, dict):
        raise invalid_json(f"the body must be a JSON object, not {_kind(value)}")
    try:
        taken = payloads.take(message.DESCRIPTOR, value)
        json_format.ParseDict(payloads.plain(value), message)
    except json_format.ParseError as error:
        raise invalid_json(str(error)) from None
    except payloads.PayloadError as error:
        raise invalid_json(str(error)) from None
    payloads.put(message, taken)
    return message


def dumps(data: Any, indent: int | None = None) -> str:
    """JSON text of an answer made by to_json: payloads spliced in as their exact text."""
    return payloads.dumps(data, indent)


def decode_body(raw: bytes) -> Any:
    """The decoded JSON of a request body ({} for an empty one), at most MAX_BODY_DEPTH
    levels deep."""
    if not raw.strip():
        return {}
    try:
        value = payloads.loads(raw)  # numbers as written: a payload keeps them exactly
    except UnicodeDecodeError:
        raise invalid_json("the body is not UTF-8 text; send a JSON object") from None
    except payloads.NotANumberError as error:
        raise invalid_json(f"the body is not valid JSON: {error}") from None
    except json.JSONDecodeError as error:
        # Where, in the API's words; the decoder's own ("Expecting value") means little here.
        raise invalid_json(
            f"the body is not valid JSON (it stops making sense at line {error.lineno}, column "
            f"{error.colno}); send a JSON object, for example {{}}"
        ) from None
    except RecursionError:  # the decoder's own stack limit, some thousand levels down
        raise _too_deep() from None
    if _deeper_than(value, MAX_BODY_DEPTH):
        raise _too_deep()
    return value


def _too_deep() -> ApiError:
    return invalid_json(
        f"the body nests deeper than {MAX_BODY_DEPTH} levels (a payload may nest "
        f"{MAX_PAYLOAD_DEPTH})"
    )


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether decoded JSON has more than `limit` levels of arrays and objects (walked with a
    stack of its own: no recursion, however deep)."""
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def error_body(
    code: grpc.StatusCode, reason: str, message: str, status: int | None = None
) -> dict[str, Any]:
    """The JSON of an error answer: the HTTP status of its gRPC code unless `status` says."""
    return {
        "error": {
            "code": code.name,
            "status": status or HTTP_STATUS.get(code, 500),
            "reason": reason,
            "message": message,
        }
    }


def rpc_error_body(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The JSON of the error a gRPC call ended with, its ErrorInfo reason included."""
    return error_body(error.code(), reason_of(error), error.details() or "")


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
