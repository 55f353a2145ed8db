"""The scheduler's vocabulary: why a task is due (mirroring what history's runs wait for; tests/
unit/scheduler/test_model.py keeps them in step), and the records its store passes around."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from perdure.scheduler.flow.model import RunBudget, TaskFlow


class DueReason(StrEnum):
    """What a timed due time waits for: history's wait kind (WaitKind) of a timed wait, in lower
    case, as history sends it (EnqueueTasks' `wake_reason`) and as timer lateness is labelled."""

    TIMER = "timer"
    SIGNAL = "signal"  # a signal wait's timeout
    RETRY = "retry"  # a step's next attempt


# The wake_reason history sends for a parked run an operator resumed (its recovery.py): no due
# reason, but the one request that opens the run's own task again after its close.
REOPEN = "resume"
# The wake_reason history sends for a debounced run's later due time (its start_keys.py): no
# due reason, but a due time that replaces an earlier one while no worker was granted the run.
DEBOUNCE = "debounce"


class TaskKey(NamedTuple):
    """A task's identity: its workflow id and step id ('' for the workflow's own task)."""

    workflow_id: str
    step_id: str


class Usage(NamedTuple):
    """What a step's attempt reported it used."""

    units: int
    cost: int


class Lease(NamedTuple):
    """A lease a worker reports: its task and fence."""

    workflow_id: str
    step_id: str
    fence: int

    @property
    def task(self) -> TaskKey:
        return TaskKey(self.workflow_id, self.step_id)


@dataclass(frozen=True)
class DueTask:
    """A task to make due (a scheduling request from history)."""

    workflow_id: str
    step_id: str  # '' for the workflow's own task
    task_type: str  # the workflow type, or a step task's step type
    task_queue: str
    run_at: datetime | None = None  # None: now
    due_reason: DueReason | None = None  # what a timed due time waits for (None: nothing)
    trace_context: dict[str, str] | None = None  # the workflow's
    fence_floor: int = 0  # history's fence mark: the next grant's fence is above it
    run_number: int = 1  # the run of the workflow id it is for (a newer one reopens the task)
    reopens: bool = False  # this very run was resumed: its closed task opens again (REOPEN)
    flow: TaskFlow | None = None  # its flow settings, from the request that creates it
    run_budget: RunBudget | None = None  # its run's own budget (a run's start brings it)
    delays: bool = False  # a debounced run's later due time replaces its earlier (DEBOUNCE)


@dataclass(frozen=True)
class Grant:
    """A lease just granted."""

    workflow_id: str
    step_id: str  # '' for a workflow task
    task_type: str  # the workflow type, or a step task's step type
    fence: int
    previous_owner: str | None  # set when the lease expired and this grant takes over
    due_at: datetime
    late_by: float  # seconds from due to granted, on the database clock (< 0: granted ahead)
    due_reason: DueReason | None  # a timed wake-up firing
    trace_context: dict[str, str] | None
    lease_expires_at: datetime  # database clock
    sticky_id: str | None = None  # the worker its run was kept for, if any
    budget_exceeded: str = ""  # granted only to fail: the budget its estimate exceeds
    reserves: bool = False  # a reservation was made with it (settled at its TaskDone)

    @property
    def lease(self) -> Lease:
        return Lease(self.workflow_id, self.step_id, self.fence)


@dataclass(frozen=True)
class OwnRenewal:
    """A worker's renewal of its own leases: the database clock's now, and the new expiry of
    each lease renewed."""

    now: datetime
    expiries: dict[Lease, datetime]


@dataclass(frozen=True)
class Build:
    """What routing by build needs of a claiming session (builds.py): its namespace, its build,
    and the workflow types of which that build is the newest on its queue."""

    namespace: str = "default"
    build_id: str = ""
    newest_types: list[str] = field(default_factory=list)
