"""One event append: the single appends and the batched one (group commit) insert the same
columns, from the same parameters."""

from __future__ import annotations

import re

import pytest

from perdure.history import chains, children, deadlines, relatives, store
from perdure.history.model import EventType

_INSERT = re.compile(r"INSERT INTO history\.events \(([^)]*)\)")
# Every statement that appends an event, each through insert_event.
APPENDS = {
    name: getattr(store, name)
    for name in (
        "RECORD_EVENTS",
        "CONSUME_SIGNALS",
        "SUSPEND",
        "CLOSE_RUN",
        "SIGNAL",
        "REQUEST_CANCEL",
        "TERMINATE",
        "SCHEDULE_STEP",
        "START_WORKFLOW",
        "LOAD_STEP",
        "RECORD_STEP_TASK",
        "START_CHILD",
    )
} | {
    "EXPIRE_RUNS": deadlines.EXPIRE_RUNS,
    "CARRY_SIGNALS": chains.CARRY_SIGNALS,
    "CHILD_OUTCOME": relatives.CHILD_OUTCOME,
    "FAIL_UNFORKED_CHILDREN": children.FAIL_UNFORKED_CHILDREN,
}


def inserted_columns(statement: str) -> list[str]:
    (columns,) = _INSERT.findall(statement)
    return [column.strip() for column in columns.split(",")]


@pytest.mark.parametrize("name", APPENDS)
def test_every_append_writes_every_event_column(name: str) -> None:
    columns = inserted_columns(APPENDS[name])
    # due_in: due_at; part: the run's, from its row
    expected = ["event_id", "part", *(c for c in store.EVENT_PARAMS if c != "due_in")]
    assert sorted(columns) == sorted(expected)


def test_the_batched_append_takes_every_event_parameter_the_lease_key_and_unless_cancel() -> None:
    assert set(store.RECORD_EVENTS_COLUMNS) == {*store.EVENT_PARAMS, "lease_key", "unless_cancel"}


def test_event_params_gives_every_parameter() -> None:
    params = store.event_params(workflow_id="w", event_type=EventType.TIMER_STARTED)
    assert set(store.RECORD_EVENTS_COLUMNS) <= set(params)
    assert params["event_type"] == "TIMER_STARTED" and params["lease_key"] == ""
