"""Conversions between protobuf well-known types and plain Python, shared by the services."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2


def value_to_python(value: struct_pb2.Value) -> Any:
    """A protobuf Value as plain JSON-able Python (an unset Value is null)."""
    if not value.WhichOneof("kind"):
        return None
    return json_format.MessageToDict(value)


def python_to_value(data: Any) -> struct_pb2.Value:
    """Plain JSON-able Python as a protobuf Value."""
    return json_format.ParseDict(data, struct_pb2.Value())


def timestamp(moment: datetime | None) -> timestamp_pb2.Timestamp | None:
    """A timezone-aware datetime as a protobuf Timestamp (None stays None)."""
    if moment is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp
