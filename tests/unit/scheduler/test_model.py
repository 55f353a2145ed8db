"""The scheduler's due reasons mirror what history's runs wait for: history sends a timed
wait's kind, in lower case, as a task's wake_reason."""

from __future__ import annotations

from datetime import UTC, datetime

from perdure.history.model import WaitKind
from perdure.scheduler.model import DueReason, Grant, Lease, TaskKey


def test_due_reasons_are_historys_timed_wait_kinds() -> None:
    # A remote step's, a child's and an approval's waits have no time of their own: the outcome
    # (an approval's decision, escalation or expiry, which history times itself) wakes the run.
    untimed = (WaitKind.STEP, WaitKind.CHILD, WaitKind.APPROVAL)
    timed = {kind.wake_reason for kind in WaitKind if kind not in untimed}
    assert set(DueReason) == timed


def test_a_grant_names_its_lease_and_a_lease_its_task() -> None:
    lease = Lease("wf-1", "charge", 3)
    assert lease.task == TaskKey("wf-1", "charge") == ("wf-1", "charge")
    assert {lease} == {("wf-1", "charge", 3)}  # as the worker's reports name them
    now = datetime.now(UTC)
    grant = Grant("wf-1", "charge", "charge", 3, None, now, 0.0, DueReason.RETRY, None, now)
    assert grant.lease == lease
