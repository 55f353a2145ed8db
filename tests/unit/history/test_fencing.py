"""Every journal write carries the fence: each statement that writes under a lease composes its
condition from history/fencing.py, and a new write statement must say which kind it is."""

from __future__ import annotations

import re

import pytest

from perdure.history import (
    children,
    deadlines,
    fencing,
    outbox,
    recovery,
    relatives,
    store,
    stranded,
)

# Writes under a run's lease (a worker running the run's code).
RUN_LEASE_WRITES = {
    "RECORD_EVENTS": store._BATCHED_LEASE_HELD,
    "CONSUME_SIGNALS": fencing.run_lease_held(),
    "SUSPEND": fencing.run_lease_held(),
    "CLOSE_RUN": fencing.run_lease_held(),
    "CLOSE_RUN_RETURNING_IT": fencing.run_lease_held(),
    "RECORD_HEARTBEAT": fencing.run_lease_held(),
    "SCHEDULE_STEP": fencing.run_lease_held(),
    "START_CHILD": fencing.run_lease_held(),
}
# Writes under a remote step's own lease (the worker executing it).
STEP_LEASE_WRITES = {
    "RECORD_STEP_TASK": fencing.step_lease_held(),
    "RECORD_STEP_HEARTBEAT": fencing.step_lease_held("s."),
}
# Loads: they raise the fence mark (the advance) and write nothing else under a lesser fence.
ADVANCES = {
    "ADVANCE_FENCE": fencing.run_lease_taken(),
    "LOAD_STEP": fencing.step_lease_taken("s."),
}
# The platform's writes: no lease, by design (a start, requests from outside the run, the
# deadline watch, the stranded-run sweep, the outbox relay, an operator's resume, reset or fork).
PLATFORM_WRITES = {
    "START_WORKFLOW",
    "SIGNAL",
    "REQUEST_CANCEL",
    "TERMINATE",
    "TERMINATE_REPLACED",
    "RESUME",
    "COPY_EVENTS",
    "COPY_CONSUMPTIONS",
    "COPY_STEP_TASKS",
    "EXPIRE_RUNS",
    "REQUEUE_STRANDED",
    "CLAIM_OUTBOX",
    "ADOPT_CHILDREN",
    "FAIL_UNFORKED_CHILDREN",
    "CHILD_OUTCOME",
    "DELETE_NOTICE",
}

_WRITE = re.compile(r"\b(INSERT INTO|UPDATE|DELETE FROM)\s+history\.", re.IGNORECASE)


def write_statements() -> dict[str, str]:
    """Every statement of history that writes to its schema, by name."""
    return {
        name: value
        for module in (store, deadlines, stranded, outbox, recovery, children, relatives)
        for name, value in vars(module).items()
        if name.isupper()
        and not name.startswith("_")
        and isinstance(value, str)
        and _WRITE.search(value)
    }


def test_every_write_statement_is_classified() -> None:
    classified = {*RUN_LEASE_WRITES, *STEP_LEASE_WRITES, *ADVANCES, *PLATFORM_WRITES}
    assert set(write_statements()) == classified


@pytest.mark.parametrize("name", sorted(RUN_LEASE_WRITES))
def test_run_lease_writes_carry_the_run_fence(name: str) -> None:
    statement = write_statements()[name]
    condition = RUN_LEASE_WRITES[name]
    assert condition in statement
    # The one spelling: the fence mark, the key that loaded it, an open run.
    for part in ("fence = ", "fence_key = ", f"status IN {fencing.OPEN}"):
        assert part in condition


@pytest.mark.parametrize("name", sorted(STEP_LEASE_WRITES))
def test_step_lease_writes_carry_the_step_fence(name: str) -> None:
    statement = write_statements()[name]
    condition = STEP_LEASE_WRITES[name]
    assert condition in statement
    for part in ("fence = %(fence)s", "fence_key = %(lease_key)s", "NOT "):
        assert part in condition


@pytest.mark.parametrize("name", sorted(ADVANCES))
def test_loads_advance_the_fence_with_the_loading_key(name: str) -> None:
    statement = write_statements()[name]
    assert ADVANCES[name] in statement
    assert f"SET {fencing.TAKE_LEASE}" in statement


def test_the_fence_condition_is_spelled_only_in_fencing() -> None:
    """No statement spells a fence comparison of its own."""
    spelled = re.compile(r"fence\s*(=|<=)\s*%\(fence\)s")
    for name, statement in write_statements().items():
        rest = statement
        for condition in (
            *RUN_LEASE_WRITES.values(),
            *STEP_LEASE_WRITES.values(),
            *ADVANCES.values(),
            fencing.TAKE_LEASE,
        ):
            rest = rest.replace(condition, "")
        # ADVANCE_FENCE compares the fence to count idle loads, not to fence a write.
        rest = rest.replace("WHEN fence = %(fence)s THEN idle_loads", "")
        assert not spelled.search(rest), name


def test_open_is_the_enum_s_open_statuses() -> None:
    assert fencing.OPEN == "('RUNNING', 'WAITING')"
