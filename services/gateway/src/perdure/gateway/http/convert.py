"""JSON in and out of the API's messages, and gRPC statuses as HTTP errors."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from perdure.common.errors import ApiError

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

M = TypeVar("M", bound=Message)


def invalid_json(message: str) -> ApiError:
    """A body or parameter that does not fit the request message."""
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_JSON", message)


def to_json(message: Message) -> dict[str, Any]:
    """A message in the proto3 JSON mapping, with .proto field names and every field that has
    no presence (scalars, lists, maps) printed even when unset."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def from_json(value: Any, message: M) -> M:
    """Fill `message` from decoded JSON; ApiError (400) naming what does not fit."""
    if not isinstance(value, dict):
        raise invalid_json(f"the body must be a JSON object, not {_kind(value)}")
    try:
        json_format.ParseDict(value, message)
    except json_format.ParseError as error:
        raise invalid_json(str(error)) from None
    return message


def decode_body(raw: bytes) -> Any:
    """The decoded JSON of a request body ({} for an empty one)."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise invalid_json(f"the body is not valid JSON: {error}") from None


def error_body(code: grpc.StatusCode, reason: str, message: str) -> dict[str, Any]:
    """The JSON of an error answer."""
    return {
        "error": {
            "code": code.name,
            "status": HTTP_STATUS.get(code, 500),
            "reason": reason,
            "message": message,
        }
    }


def rpc_error_body(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The JSON of the error a gRPC call ended with, its ErrorInfo reason included."""
    return error_body(error.code(), _reason_of(error), error.details() or "")


def _reason_of(error: grpc.aio.AioRpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
