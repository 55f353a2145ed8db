"""The journal's vocabulary: run statuses, event types, wait kinds and run outcomes as stored
(each mirrors a proto enum or oneof without its prefix; tests/unit/history/test_model.py keeps
them in step), and the records the handlers pass to the journal."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.history.rows import Row


class RunStatus(StrEnum):
    """A run's status (WorkflowStatus without WORKFLOW_STATUS_)."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    PARKED = "PARKED"
    WAITING = "WAITING"
    CANCELLED = "CANCELLED"
    TERMINATED = "TERMINATED"
    CONTINUED_AS_NEW = "CONTINUED_AS_NEW"

    @property
    def proto(self) -> str:
        """The WorkflowStatus name of the status."""
        return f"WORKFLOW_STATUS_{self}"


# A run is open while its code may still write to it.
OPEN_STATUSES = (RunStatus.RUNNING, RunStatus.WAITING)


class EventType(StrEnum):
    """A journal event's type (EventType without EVENT_TYPE_)."""

    WORKFLOW_STARTED = "WORKFLOW_STARTED"
    STEP_COMPLETED = "STEP_COMPLETED"
    STEP_FAILED = "STEP_FAILED"
    WORKFLOW_COMPLETED = "WORKFLOW_COMPLETED"
    WORKFLOW_FAILED = "WORKFLOW_FAILED"
    WORKFLOW_PARKED = "WORKFLOW_PARKED"
    STEP_ATTEMPT_FAILED = "STEP_ATTEMPT_FAILED"
    TIMER_STARTED = "TIMER_STARTED"
    SIGNAL_RECEIVED = "SIGNAL_RECEIVED"
    SIGNAL_CONSUMED = "SIGNAL_CONSUMED"
    SIGNAL_TIMED_OUT = "SIGNAL_TIMED_OUT"
    STATE_UPDATED = "STATE_UPDATED"
    WORKFLOW_SUSPENDED = "WORKFLOW_SUSPENDED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    CANCELLATION_DELIVERED = "CANCELLATION_DELIVERED"
    WORKFLOW_CANCELLED = "WORKFLOW_CANCELLED"
    WORKFLOW_TERMINATED = "WORKFLOW_TERMINATED"
    STEP_SCHEDULED = "STEP_SCHEDULED"
    STEP_ATTEMPT_STARTED = "STEP_ATTEMPT_STARTED"
    WORKFLOW_CONTINUED_AS_NEW = "WORKFLOW_CONTINUED_AS_NEW"
    PATCH_RECORDED = "PATCH_RECORDED"
    WORKFLOW_RESUMED = "WORKFLOW_RESUMED"
    CHILD_WORKFLOW_STARTED = "CHILD_WORKFLOW_STARTED"
    CHILD_WORKFLOW_COMPLETED = "CHILD_WORKFLOW_COMPLETED"
    CHILD_WORKFLOW_FAILED = "CHILD_WORKFLOW_FAILED"
    APPROVAL_REQUESTED = "APPROVAL_REQUESTED"
    APPROVAL_DECIDED = "APPROVAL_DECIDED"
    APPROVAL_ESCALATED = "APPROVAL_ESCALATED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"


# Events whose payload column holds a payload (JSON null included).
PAYLOAD_EVENTS = frozenset(
    {
        EventType.WORKFLOW_STARTED,
        EventType.STEP_COMPLETED,
        EventType.WORKFLOW_COMPLETED,
        EventType.SIGNAL_RECEIVED,
        EventType.SIGNAL_CONSUMED,
        EventType.STATE_UPDATED,
        EventType.STEP_SCHEDULED,
        EventType.WORKFLOW_CONTINUED_AS_NEW,  # the next run's input
        EventType.CHILD_WORKFLOW_STARTED,  # the child's input
        EventType.CHILD_WORKFLOW_COMPLETED,  # its result
        EventType.APPROVAL_REQUESTED,  # the details
        EventType.APPROVAL_DECIDED,  # the decision, as JSON
        EventType.APPROVAL_ESCALATED,
        EventType.APPROVAL_EXPIRED,
    }
)


class WaitKind(StrEnum):
    """What a waiting run waits for (WaitKind without WAIT_KIND_)."""

    TIMER = "TIMER"
    SIGNAL = "SIGNAL"
    RETRY = "RETRY"
    STEP = "STEP"
    CHILD = "CHILD"
    APPROVAL = "APPROVAL"

    @property
    def wake_reason(self) -> str:
        """What the scheduler is told a timed wait of this kind waits for (EnqueueTasks'
        `wake_reason`, the scheduler's due reason): the kind in lower case."""
        return self.lower()


class Outcome(StrEnum):
    """How a run's code ends it (FinishWorkflowRequest's `outcome` oneof)."""

    RESULT = "result"
    FAILURE = "failure"
    PARK = "park"
    CANCELLED = "cancelled"
    CONTINUE_AS_NEW = "continue_as_new"

    @property
    def status(self) -> RunStatus:
        """The status the run closes with."""
        return _CLOSED_STATUS[self]


_CLOSED_STATUS = {
    Outcome.RESULT: RunStatus.COMPLETED,
    Outcome.FAILURE: RunStatus.FAILED,
    Outcome.PARK: RunStatus.PARKED,
    Outcome.CANCELLED: RunStatus.CANCELLED,
    Outcome.CONTINUE_AS_NEW: RunStatus.CONTINUED_AS_NEW,
}


def sql_list(values: Iterable[StrEnum]) -> str:
    """Enum values as a SQL list literal, e.g. ('RUNNING', 'WAITING'), for static statements."""
    names = list(values)
    if not names or not all(re.fullmatch(r"[A-Za-z_]+", name) for name in names):
        raise ValueError(f"not a list of plain names: {names!r}")
    return "(" + ", ".join(f"'{name}'" for name in names) + ")"


class ParentClosePolicy(StrEnum):
    """What a parent's close does to its open children (ParentClosePolicy without
    PARENT_CLOSE_POLICY_; unspecified is TERMINATE)."""

    TERMINATE = "TERMINATE"
    REQUEST_CANCEL = "REQUEST_CANCEL"
    ABANDON = "ABANDON"

    @property
    def proto(self) -> str:
        """The ParentClosePolicy name of the policy."""
        return f"PARENT_CLOSE_POLICY_{self}"


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parent:
    """A child run's link to its parent: the parent's chain and run, the call that started
    the child (its step id), and the parent-close policy."""

    workflow_id: str
    run_id: str
    step_id: str
    close_policy: ParentClosePolicy

    def params(self) -> dict[str, Any]:
        """START_WORKFLOW's parameters of the link."""
        return {
            "parent_workflow_id": self.workflow_id,
            "parent_run_id": self.run_id,
            "parent_step_id": self.step_id,
            "parent_close_policy": str(self.close_policy),
        }


# START_WORKFLOW's parameters of a run that is no child.
NO_PARENT = dict.fromkeys(
    ("parent_workflow_id", "parent_run_id", "parent_step_id", "parent_close_policy")
)


@dataclass(frozen=True)
class ChildStart:
    """What a parent's StartChild call asks for."""

    workflow_id: str  # the child's, qualified in the parent's namespace
    workflow_type: str
    task_queue: str  # qualified
    input_value: Payload
    close_policy: ParentClosePolicy


@dataclass(frozen=True)
class StartKeys:
    """A start's debounce and singleton keys (start_keys.py); all None for a plain start."""

    debounce_key: str | None = None
    debounce_window: float | None = None  # seconds
    singleton_key: str | None = None

    @property
    def keyed(self) -> bool:
        return self.debounce_key is not None or self.singleton_key is not None

    def params(self) -> dict[str, Any]:
        """START_WORKFLOW's parameters of the keys."""
        return {
            "debounce_key": self.debounce_key,
            "debounce_window": self.debounce_window,
            "singleton_key": self.singleton_key,
        }


@dataclass(frozen=True)
class Lease:
    """A worker's lease as a call names it: the run (and a remote step's own lease: its step
    id), the fence token, and the API key the call was made with ("" without keys)."""

    workflow_id: str
    fence: int
    key: str
    step_id: str = ""


@dataclass(frozen=True)
class Call:
    """Where a worker's record belongs: the lease and the call of the code."""

    lease: Lease
    step_id: str
    step_name: str
    position: int

    @property
    def workflow_id(self) -> str:
        return self.lease.workflow_id

    @property
    def fence(self) -> int:
        return self.lease.fence


@dataclass(frozen=True)
class StepRecord:
    """What a worker records at one call of its code, beyond the call itself. A failed attempt
    is not `positioned`: the call's position belongs to its final outcome."""

    event_type: EventType
    positioned: bool = True
    attempt: int | None = None
    payload: Payload | None = None
    failure: dict[str, str] | None = None
    due_at: datetime | None = None
    due_in: float | None = None  # seconds from now, when due_at is unset
    name: str | None = None
    started_at: datetime | None = None
    # Not journaled if the run has a cancel request (an attempt's start sent beside an output).
    unless_cancel: bool = False


@dataclass(frozen=True)
class Appended:
    """What an append returns to the worker."""

    event_id: int
    due_at: datetime | None
    cancel_requested: bool


@dataclass(frozen=True)
class RemoteStep:
    """What a remote step's call asks for: where it runs and how its attempts go."""

    step_type: str
    task_queue: str
    input_value: Payload
    retry: dict[str, Any]  # the RetryPolicy message as JSON
    timeout_seconds: float | None
    heartbeat_timeout_seconds: float | None = None
    flow: bytes | None = None  # its flow settings (a serialized StepFlow; None: none)


@dataclass(frozen=True)
class StepAttempt:
    """A step task's record of one attempt of its remote step (under the step's own lease)."""

    lease: Lease
    attempt: int
    event_type: EventType  # STEP_COMPLETED, STEP_FAILED or STEP_ATTEMPT_FAILED
    payload: Payload | None
    failure: dict[str, str] | None
    retry_in: float | None  # STEP_ATTEMPT_FAILED: seconds until the next attempt
    started_at: datetime | None
    usage: dict[str, Any] | None = None  # what it used (units, cost_micros, model), if reported


@dataclass(frozen=True)
class StepTask:
    """A remote step's task as its executor loads it: what to execute and how."""

    workflow_type: str
    step_type: str
    input_value: Payload
    attempt: int  # the attempt the load started, or the lost one to record as failed
    attempt_lost: bool
    retry: dict[str, Any]  # the RetryPolicy message as JSON
    timeout_seconds: float | None
    heartbeat_timeout_seconds: float | None
    heartbeat_details: Payload | None  # the last progress of an earlier attempt


@dataclass(frozen=True)
class Wait:
    """What a suspending run waits for, and until when (a timer's or a retry's wake-up)."""

    kind: WaitKind
    name: str
    until: datetime | None


@dataclass(frozen=True)
class Described:
    """Everything DescribeWorkflow shows."""

    info: wf.WorkflowInfo
    steps: list[wf.StepInfo]
    current_step: str
    pending_signals: list[wf.PendingSignal]
    state: dict[str, Payload]
    flow: bytes | None = None  # its flow settings (a serialized RunFlow; None: none)
    children: list[wf.ChildWorkflow] = field(default_factory=list)  # in the order started


@dataclass(frozen=True)
class Loaded:
    """A page of a run as a worker loads it."""

    info: wf.WorkflowInfo
    events: list[wf.HistoryEvent]
    now: datetime
    clock: datetime  # the database clock after the page was read (LoadJournalResponse.clock)
    progress: list[Row]  # see convert.progress_rows
    more: bool  # the journal goes on after this page's events
    previous_fence: int  # the run's mark before this load raised it
    history_length: int  # events in the journal
    history_bytes: int  # the journal's bytes (store.count_event)
