"""JSON payloads and failures as the worker protocol carries them."""

from __future__ import annotations

import json
import traceback
from typing import Any

from google.protobuf import json_format, struct_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf


def to_value(data: Any) -> struct_pb2.Value:
    """Encode a JSON-able Python value; raise TypeError naming what is not JSON."""
    try:
        json.dumps(data, allow_nan=False)  # NaN and Infinity are not JSON
        return json_format.ParseDict(data, struct_pb2.Value())
    except (json_format.ParseError, TypeError, ValueError) as error:
        raise TypeError(
            f"value of type {type(data).__name__} is not JSON-serializable: {error}"
        ) from None


def from_value(value: struct_pb2.Value) -> Any:
    """Decode a protobuf Value (an unset one is None); whole numbers come back as int."""
    if not value.WhichOneof("kind"):
        return None
    return _whole_numbers_as_int(json_format.MessageToDict(value))


def _whole_numbers_as_int(data: Any) -> Any:
    # JSON numbers travel as doubles; `3` should not come back as `3.0`.
    if isinstance(data, float) and data.is_integer() and abs(data) <= _MAX_EXACT_INT:
        return int(data)
    if isinstance(data, dict):
        return {key: _whole_numbers_as_int(item) for key, item in data.items()}
    if isinstance(data, list):
        return [_whole_numbers_as_int(item) for item in data]
    return data


_MAX_EXACT_INT = 2**53


def failure_from(error: BaseException) -> wf.Failure:
    """Describe an exception for the journal."""
    return wf.Failure(
        type=type(error).__name__,
        message=str(error),
        stack_trace="".join(traceback.format_exception(error)),
    )
