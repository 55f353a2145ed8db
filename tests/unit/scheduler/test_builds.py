"""The newest build of each workflow type on a queue: among connected sessions serving it, the
build first seen last (a tie goes to the greater id), judged per queue and per type."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from perdure.common import errors
from perdure.scheduler.builds import newest_builds, policy_of

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class Seen:
    task_queue: str
    build_id: str
    build_seen: datetime | None
    workflow_types: list[str] = field(default_factory=lambda: ["order"])


def test_the_build_first_seen_last_is_the_newest_per_queue_and_type() -> None:
    sessions = [
        Seen("q", "v1", T0, ["order", "refund"]),
        Seen("q", "v2", T0 + timedelta(minutes=5), ["order"]),
        Seen("q", "v1", T0),  # a second worker of v1 changes nothing
        Seen("other", "v1", T0),
        Seen("q", "v0", None),  # not registered yet: not a candidate
    ]
    assert newest_builds(sessions) == {
        ("q", "order"): "v2",
        ("q", "refund"): "v1",  # v2 does not serve it
        ("other", "order"): "v1",
    }


def test_builds_first_seen_together_are_ordered_by_id() -> None:
    sessions = [Seen("q", "b", T0), Seen("q", "a", T0)]
    assert newest_builds(sessions) == {("q", "order"): "b"}
    assert newest_builds(list(reversed(sessions))) == {("q", "order"): "b"}


@pytest.mark.parametrize("value", [0, 4, 99])
def test_an_unknown_policy_is_refused(value: int) -> None:
    with pytest.raises(errors.ApiError, match="policy must be"):
        policy_of(value)
