"""Validation of JSON payloads (google.protobuf.Value) arriving from any client or worker."""

from __future__ import annotations

import math

import grpc
from google.protobuf import struct_pb2

from perdure.common import errors
from perdure.common.text import require_storable

MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
# Protobuf decoders stop at 100 levels of message nesting, and each JSON level costs two or
# three of them; 32 JSON levels stay decodable everywhere.
MAX_PAYLOAD_DEPTH = 32


def validate_payload(field: str, value: struct_pb2.Value) -> None:
    """A JSON value: every node set, numbers finite, no NUL in strings, bounded depth and
    size."""
    size = value.ByteSize()
    if size > MAX_PAYLOAD_BYTES:
        raise errors.ApiError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "PAYLOAD_TOO_LARGE",
            f"{field} is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} bytes",
        )
    _json_value(field, value, 0)


def _json_value(path: str, value: struct_pb2.Value, depth: int) -> None:
    if depth > MAX_PAYLOAD_DEPTH:
        raise errors.invalid_argument(f"{path} nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    kind = value.WhichOneof("kind")
    if kind is None:
        raise errors.invalid_argument(f"{path} is not a JSON value: no kind is set")
    if kind == "number_value" and not math.isfinite(value.number_value):
        raise errors.invalid_argument(
            f"{path} is not JSON: {value.number_value} is not a finite number"
        )
    if kind == "string_value":
        require_storable(path, value.string_value)
    elif kind == "struct_value":
        for key, item in value.struct_value.fields.items():
            require_storable(f"{path} key {key[:50]!r}", key)
            _json_value(f"{path}.{key}", item, depth + 1)
    elif kind == "list_value":
        for index, item in enumerate(value.list_value.values):
            _json_value(f"{path}[{index}]", item, depth + 1)
