"""Payloads and failures as the worker protocol carries them. A value is encoded exactly or
refused: bytes travel as "binary/plain", everything else as "json/plain" (integers of any
size, floats that stay floats, str, bool, None, lists and dicts with str keys)."""

from __future__ import annotations

import json
import math
import traceback
from typing import Any

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf

JSON = "json/plain"
BINARY = "binary/plain"


# A payload this small and this shallow is one history takes as it is (its limits: 2 MiB, and
# JSON nested at most 32 levels): fewer than 33 brackets cannot nest deeper.
SURELY_ACCEPTED_BYTES = 64 * 1024
_SURELY_ACCEPTED_BRACKETS = 32


def surely_accepted(payload: Payload) -> bool:
    """Whether history is sure to take this payload as it is (an encoding of to_payload's)."""
    data = payload.data
    return len(data) <= SURELY_ACCEPTED_BYTES and (
        payload.encoding == BINARY
        or data.count(b"[") + data.count(b"{") <= _SURELY_ACCEPTED_BRACKETS
    )


def to_payload(data: Any) -> Payload:
    """Encode a value; raise TypeError naming the type of what cannot be encoded exactly
    (NaN and infinities, sets, bytes inside a JSON value, dict keys that are not str, other
    objects). A tuple is encoded as a JSON array (it reads back as a list); a Payload is
    taken as encoded already."""
    if isinstance(data, Payload):
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return Payload(encoding=BINARY, data=bytes(data))
    _require_json(data, "value")
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return Payload(encoding=JSON, data=text.encode())


def _require_json(data: Any, path: str) -> None:
    if data is None or isinstance(data, str | bool | int):
        return
    if isinstance(data, float):
        if not math.isfinite(data):
            raise TypeError(f"{path} of type float is not encodable: {data} is not a JSON number")
        return
    if isinstance(data, list | tuple):
        for index, item in enumerate(data):
            _require_json(item, f"{path}[{index}]")
        return
    if isinstance(data, dict):
        for key, item in data.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{path} key {key!r} of type {type(key).__name__} is not encodable: JSON "
                    "object keys are str"
                )
            _require_json(item, f"{path}[{key!r}]")
        return
    hint = " (bytes travel only as a whole payload)" if isinstance(data, bytes) else ""
    raise TypeError(f"{path} of type {type(data).__name__} is not encodable{hint}")


def from_payload(payload: Payload) -> Any:
    """Decode a payload (an unset one is None): bytes, or the JSON value as written (1.0 is a
    float, 2**64 + 1 an int)."""
    if payload.encoding == BINARY:
        return bytes(payload.data)
    if payload.encoding not in ("", JSON):
        raise ValueError(f"payload encoding {payload.encoding!r} is not one this SDK reads")
    return json.loads(payload.data) if payload.data else None


def failure_from(error: BaseException) -> wf.Failure:
    """Describe an exception for the journal."""
    return wf.Failure(
        type=type(error).__name__,
        message=str(error),
        stack_trace="".join(traceback.format_exception(error)),
    )
