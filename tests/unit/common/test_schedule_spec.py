"""Schedule specs: cron and interval slots, and the messages that say how to fix a bad one."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest

from perdure.common.errors import ApiError
from perdure.common.schedule_spec import Spec, parse


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_an_interval_s_slots_fall_on_the_epoch_plus_its_offset() -> None:
    spec = parse("", 60, 15)
    assert spec.next_slot(at("2026-01-01T00:00:15")) == at("2026-01-01T00:01:15")
    assert spec.first_slot_from(at("2026-01-01T00:00:15")) == at("2026-01-01T00:00:15")
    assert spec.slots(at("2026-01-01T00:00:00"), 2) == [
        at("2026-01-01T00:00:15"),
        at("2026-01-01T00:01:15"),
    ]
    assert spec.count_slots(at("2026-01-01T00:00:15"), at("2026-01-01T00:03:15")) == 3


def test_a_cron_s_slots_are_in_utc() -> None:
    spec = parse("0 9 * * 1-5", None, 0)  # weekdays at 09:00
    assert spec.next_slot(at("2026-01-02T09:00:00")) == at("2026-01-05T09:00:00")  # Fri → Mon
    assert spec.count_slots(at("2026-01-05T00:00:00"), at("2026-01-10T00:00:00")) == 5
    assert Spec(cron="*/15 * * * *").slots(at("2026-01-01T00:00:00"), 2) == [
        at("2026-01-01T00:15:00"),
        at("2026-01-01T00:30:00"),
    ]


@pytest.mark.parametrize(
    ("cron", "interval", "offset", "says"),
    [
        ("", None, 0, "exactly one of cron"),
        ("* * * * *", 60, 0, "exactly one of cron"),
        ("* * * *", None, 0, "has 4 fields"),
        ("* * * * * *", None, 0, "has 6 fields"),
        ("61 * * * *", None, 0, "not a valid cron expression"),
        ("*/0 * * * *", None, 0, "not a valid cron expression"),
        ("0 0 30 2 *", None, 0, "never fires"),
        ("* * * * *", None, 5, "offset goes with spec.interval"),
        ("", 0, 0, "whole number of seconds from 1 s"),
        ("", -5, 0, "whole number of seconds from 1 s"),
        ("", 1.5, 0, "whole number of seconds from 1 s"),
        ("", 60, 60, "less than the interval"),
    ],
)
def test_a_bad_spec_is_invalid_argument_saying_what_to_write(
    cron: str, interval: float | None, offset: float, says: str
) -> None:
    with pytest.raises(ApiError) as raised:
        parse(cron, interval, offset)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert says in raised.value.message
