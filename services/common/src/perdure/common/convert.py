"""Conversions between protobuf well-known types and plain Python, shared by the services."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import duration_pb2, json_format, struct_pb2, timestamp_pb2

from perdure.common import errors


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


def seconds_of(field: str, duration: duration_pb2.Duration) -> float:
    """A request's Duration in seconds; INVALID_ARGUMENT naming the field if it is not one."""
    try:
        return duration.ToTimedelta().total_seconds()
    except (ValueError, OverflowError) as error:
        raise errors.invalid_argument(f"{field} is not a valid Duration: {error}") from None


def datetime_of(field: str, stamp: timestamp_pb2.Timestamp) -> datetime:
    """A request's Timestamp as an aware datetime; INVALID_ARGUMENT naming the field if it is
    not one (out of range, or invalid nanos)."""
    try:
        return stamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as error:
        raise errors.invalid_argument(f"{field} is not a valid Timestamp: {error}") from None
