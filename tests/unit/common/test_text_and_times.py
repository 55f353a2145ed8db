"""Request text and times that PostgreSQL and Python could not take: refused naming the field
(or, for free text, made storable)."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import duration_pb2, timestamp_pb2

from perdure.common.convert import datetime_of, seconds_of
from perdure.common.text import require_storable, storable
from tests.unit.api_errors import assert_invalid, rejected


def test_text_with_a_nul_is_refused_naming_the_field() -> None:
    require_storable("step_id", "charge#2")
    assert_invalid(rejected(lambda: require_storable("step_id", "char\x00ge")), "step_id", "NUL")


def test_free_text_keeps_everything_but_nul() -> None:
    assert storable("line\x00 two\n") == "line\ufffd two\n"


def test_durations_and_timestamps_out_of_range_are_invalid_arguments() -> None:
    assert seconds_of("delay", duration_pb2.Duration(seconds=2, nanos=500_000_000)) == 2.5
    stamp = timestamp_pb2.Timestamp(seconds=0)
    assert datetime_of("fire_time", stamp) == datetime(1970, 1, 1, tzinfo=UTC)
    bad_nanos = timestamp_pb2.Timestamp(seconds=1, nanos=-5)
    assert_invalid(rejected(lambda: datetime_of("fire_time", bad_nanos)), "fire_time")
    too_far = timestamp_pb2.Timestamp(seconds=2**62)
    assert_invalid(rejected(lambda: datetime_of("wait.until", too_far)), "wait.until")
    bad_duration = duration_pb2.Duration(seconds=2**62)
    assert_invalid(rejected(lambda: seconds_of("timeout", bad_duration)), "timeout")
