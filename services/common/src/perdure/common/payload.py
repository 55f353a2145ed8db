"""Payloads ({encoding, data}) arriving from any client or worker: the encodings the platform
knows, and the checks a payload passes before it is stored. Stored bytes are never re-encoded."""

from __future__ import annotations

import json
from typing import Any

import grpc

from perdure.api.common.v1 import payload_pb2
from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.common.text import printable

JSON = "json/plain"
BINARY = "binary/plain"
ENCODINGS = (JSON, BINARY)

MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
# Every SDK decodes what it is given; 32 JSON levels keep recursive decoders far from their
# stack limits in every language.
MAX_PAYLOAD_DEPTH = 32

NULL_DATA = b"null"


def json_payload(text: str) -> payload_pb2.Payload:
    """A JSON text as a payload."""
    return payload_pb2.Payload(encoding=JSON, data=text.encode())


def null_payload() -> payload_pb2.Payload:
    """JSON null, what an unset payload means."""
    return payload_pb2.Payload(encoding=JSON, data=NULL_DATA)


def normalized(payload: payload_pb2.Payload) -> payload_pb2.Payload:
    """A payload checked already, as it is stored: its encoding named, JSON null if unset."""
    if payload.encoding in ("", JSON) and not payload.data:
        return null_payload()
    return payload_pb2.Payload(encoding=payload.encoding or JSON, data=payload.data)


def validate_payload(field: str, payload: payload_pb2.Payload) -> payload_pb2.Payload:
    """The payload as it is stored: its encoding named ("json/plain" when empty, JSON null when
    unset), its data unchanged. INVALID_ARGUMENT for an unknown encoding or data that is not
    one JSON value within the depth limit; RESOURCE_EXHAUSTED above the size limit."""
    size = len(payload.data)
    if size > MAX_PAYLOAD_BYTES:
        raise errors.ApiError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            Reason.PAYLOAD_TOO_LARGE,
            f"{field} is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes",
        )
    encoding = payload.encoding or JSON
    if encoding not in ENCODINGS:  # refused, not carried opaquely: every SDK can read any run
        known = ", ".join(ENCODINGS)
        raise errors.invalid_argument(
            f"{field} has encoding {printable(encoding, 50)!r}; the encodings are {known}"
        )
    if encoding == JSON and payload.data:
        check_json(field, payload.data)
    return normalized(payload)


def check_json(field: str, data: bytes) -> None:
    """Refuse data that is not one UTF-8 JSON value (NaN and Infinity are not JSON) nesting at
    most MAX_PAYLOAD_DEPTH levels."""
    try:
        parsed = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as error:
        raise errors.invalid_argument(f"{field} is not UTF-8 JSON: {error}") from None
    except RecursionError:
        raise _too_deep(field) from None
    except ValueError as error:
        raise errors.invalid_argument(f"{field} is not JSON: {error}") from None
    if _depth(parsed, 0) > MAX_PAYLOAD_DEPTH:
        raise _too_deep(field)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any, depth: int) -> int:
    if depth > MAX_PAYLOAD_DEPTH:
        return depth
    if isinstance(value, dict):
        return max((_depth(item, depth + 1) for item in value.values()), default=depth)
    if isinstance(value, list):
        return max((_depth(item, depth + 1) for item in value), default=depth)
    return depth


def _too_deep(field: str) -> errors.ApiError:
    return errors.invalid_argument(f"{field} nests deeper than {MAX_PAYLOAD_DEPTH} levels")
