"""Replay: one run's journal matched to its code, call by call. Each durable call takes the
next position and a step id; the journal's event there, if any, is the call's recorded
outcome, and one of another call is non-determinism (docs/worker-protocol.md §5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._errors import NonDeterminismError

# Calls of the code that hold a position in the journal; replay walks them in order. (The
# outcome of a remote step holds none: its STEP_SCHEDULED holds the call's.) The platform's own
# events are no call and are skipped: WORKFLOW_PARKED and WORKFLOW_RESUMED (a resumed run
# replays past them), WORKFLOW_SUSPENDED (docs/worker-protocol.md §24).
POSITIONED = frozenset(
    {
        wf.EVENT_TYPE_STEP_COMPLETED,
        wf.EVENT_TYPE_STEP_FAILED,
        wf.EVENT_TYPE_STEP_SCHEDULED,
        wf.EVENT_TYPE_TIMER_STARTED,
        wf.EVENT_TYPE_SIGNAL_CONSUMED,
        wf.EVENT_TYPE_SIGNAL_TIMED_OUT,
        wf.EVENT_TYPE_STATE_UPDATED,
        wf.EVENT_TYPE_CANCELLATION_DELIVERED,
        wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED,
        wf.EVENT_TYPE_APPROVAL_REQUESTED,
    }
)
STEP_OUTCOMES = (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_STEP_FAILED)
# A child workflow's outcome holds no position either: its CHILD_WORKFLOW_STARTED holds the
# call's, and the outcome names the call by its step id.
CHILD_OUTCOMES = (wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED, wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED)
# What others than the run's lease add to its journal while it waits (with remote steps'
# attempts and outcomes): what a kept run takes in without a replay.
# What happens to an approval after its request (docs/worker-protocol.md §29): platform events
# without a position, under the request's step id.
APPROVAL_OUTCOMES = frozenset(
    {
        wf.EVENT_TYPE_APPROVAL_DECIDED,
        wf.EVENT_TYPE_APPROVAL_ESCALATED,
        wf.EVENT_TYPE_APPROVAL_EXPIRED,
    }
)
_FROM_OUTSIDE = frozenset(
    {
        wf.EVENT_TYPE_SIGNAL_RECEIVED,
        wf.EVENT_TYPE_CANCEL_REQUESTED,
        *APPROVAL_OUTCOMES,
        *CHILD_OUTCOMES,
    }
)
_REMOTE_ATTEMPTS = (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)


@dataclass(frozen=True)
class Call:
    """One durable call of the code: its identity, position, and what the journal holds."""

    step_id: str
    name: str
    position: int
    recorded: wf.HistoryEvent | None

    def ref(self) -> dict[str, Any]:
        """The fields every record of this call carries."""
        return {"step_id": self.step_id, "step_name": self.name, "position": self.position}


@dataclass(frozen=True)
class Attempts:
    """What the journal holds of a step's attempts so far."""

    failures: list[wf.HistoryEvent]  # the STEP_ATTEMPT_FAILED events, oldest first
    started: int  # the last attempt started, 0 if none

    @property
    def lost(self) -> bool:
        """An attempt started and never recorded: it was lost with its worker."""
        return self.started > 0 and self.started not in {e.attempt for e in self.failures}


class Replay:
    """The journal of one run, indexed for its code's calls, and how far the code has come."""

    def __init__(self, loaded: jpb.LoadJournalResponse) -> None:
        self.workflow_id = loaded.workflow.workflow_id
        events = list(loaded.events)
        self._scheduled = {
            e.step_id for e in events if e.event_type == wf.EVENT_TYPE_STEP_SCHEDULED
        }
        scheduled = self._scheduled
        # The outcomes of remote steps, by step id; they hold no position.
        self.remote_outcomes = {
            e.step_id: e for e in events if e.event_type in STEP_OUTCOMES and e.step_id in scheduled
        }
        # The outcomes of child workflows, by the child call's step id.
        self.child_outcomes = {e.step_id: e for e in events if e.event_type in CHILD_OUTCOMES}
        self._recorded = {
            e.position: e
            for e in events
            if e.event_type in POSITIONED and self.remote_outcomes.get(e.step_id) is not e
        }
        self._failed_attempts: dict[str, list[wf.HistoryEvent]] = {}
        self._started_attempts: dict[str, int] = {}  # the last attempt started, by step
        self._count_attempts(events)
        # A step begun (its attempts journaled) without an outcome: the code that wrote the
        # journal was running a call at its end, so that position is not the frontier (where
        # a patch may take the new path).
        attempted = {*self._failed_attempts, *self._started_attempts} - scheduled
        begun = attempted - {e.step_id for e in events if e.event_type in STEP_OUTCOMES}
        self._in_flight_at = max(self._recorded, default=-1) + 1 if begun else None
        consumed: set[int] = set()
        for event in events:
            if event.event_type == wf.EVENT_TYPE_SIGNAL_CONSUMED:
                consumed.update(event.consumed_event_ids)
        self._signals = [
            e
            for e in events
            if e.event_type == wf.EVENT_TYPE_SIGNAL_RECEIVED and e.event_id not in consumed
        ]
        # What happened to each approval since its request, by the request's step id.
        self._approvals: dict[str, dict[int, wf.HistoryEvent]] = {}
        self._take_approvals(events)
        self.progress = {p.step_id: p for p in loaded.progress}
        self.cancel_reason = next(
            (e.failure.message for e in events if e.event_type == wf.EVENT_TYPE_CANCEL_REQUESTED),
            "",
        )
        self.cancel_delivered = any(
            e.event_type == wf.EVENT_TYPE_CANCELLATION_DELIVERED for e in events
        )
        self._position = 0
        self._occurrences: dict[str, int] = {}
        # The first mismatch with the journal: the run parks with it, whatever the code does
        # after (catches it, fails, is cancelled), and no later call is replayed or recorded.
        self.non_determinism: NonDeterminismError | None = None

    def _count_attempts(self, events: list[wf.HistoryEvent]) -> None:
        for event in events:
            if event.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED:
                self._failed_attempts.setdefault(event.step_id, []).append(event)
            elif event.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_STARTED:
                last = self._started_attempts.get(event.step_id, 0)
                self._started_attempts[event.step_id] = max(last, event.attempt)

    def _take_approvals(self, events: list[wf.HistoryEvent]) -> None:
        for event in events:
            if event.event_type in APPROVAL_OUTCOMES:
                self._approvals.setdefault(event.step_id, {})[event.event_type] = event

    def approval_outcome(self, step_id: str, event_type: int) -> wf.HistoryEvent | None:
        """The approval event `event_type` (APPROVAL_OUTCOMES) of the request at `step_id`."""
        return self._approvals.get(step_id, {}).get(event_type)

    def take_in(self, loaded: jpb.LoadJournalResponse, fence: int) -> bool:
        """Take in the events recorded since this replay's journal was loaded (sticky
        execution): the writes of its own lease `fence`, which the code made and knows (its
        steps' attempts are counted: a retry goes on from them), and what others add while it
        waits: signals, cancel requests, remote steps' and child workflows' outcomes (and
        remote steps' attempts, which the code never looks at). False, and nothing taken in,
        when an event is anything else: only a replay can take it in."""
        events = list(loaded.events)
        scheduled = self._scheduled | {
            e.step_id for e in events if e.event_type == wf.EVENT_TYPE_STEP_SCHEDULED
        }
        remote = (*STEP_OUTCOMES, *_REMOTE_ATTEMPTS)
        foreign = [
            e
            for e in events
            if e.event_type not in _FROM_OUTSIDE
            and not (e.event_type in remote and e.step_id in scheduled)
        ]
        if any(e.fence != fence for e in foreign):
            return False
        self._scheduled = scheduled
        self._count_attempts(events)
        self._take_approvals(events)
        for event in events:
            if event.event_type == wf.EVENT_TYPE_SIGNAL_RECEIVED:
                self._signals.append(event)
            elif event.event_type == wf.EVENT_TYPE_CANCEL_REQUESTED:
                self.cancel_reason = self.cancel_reason or event.failure.message
            elif event.event_type in STEP_OUTCOMES and event.step_id in scheduled:
                self.remote_outcomes.setdefault(event.step_id, event)
            elif event.event_type in CHILD_OUTCOMES:
                self.child_outcomes.setdefault(event.step_id, event)
        self.progress = {p.step_id: p for p in loaded.progress}
        return True

    def next_call(self, name: str) -> Call:
        """Take the next position and step id for a call named `name`, with what the journal
        recorded there; raise NonDeterminismError if that is another call's."""
        if self.non_determinism is not None:
            raise self.non_determinism
        occurrence = self._occurrences.get(name, 0) + 1
        self._occurrences[name] = occurrence
        step_id = name if occurrence == 1 else f"{name}#{occurrence}"
        position = self._position
        self._position += 1
        recorded = self._recorded.pop(position, None)
        if recorded is not None and recorded.step_id != step_id:
            raise self.mismatch(
                f"workflow {self.workflow_id!r}: call #{position} of the code is "
                f"{step_id!r}, but the journal recorded {recorded.step_id!r} there; the "
                "code changed in a way that does not replay",
                position,
                recorded,
                call_kind(step_id),
            )
        return Call(step_id, name, position, recorded)

    def expect(self, call: Call, kinds: tuple[wf.EventType, ...], what: str) -> None:
        """Check that the event recorded at `call` is of one of `kinds` (`what`: the call,
        for the message)."""
        recorded = call.recorded
        if recorded is not None and recorded.event_type not in kinds:
            raise self.mismatch(
                f"workflow {self.workflow_id!r}: call #{call.position} is {what} "
                f"{call.step_id!r}, but the journal recorded a {_kind(recorded)} there",
                call.position,
                recorded,
                f"{what} {call.step_id!r}",
            )

    @property
    def position(self) -> int:
        """The position of the code's next call."""
        return self._position

    def at_frontier(self) -> bool:
        """No call is recorded at or after the code's next position (the calls before it were
        popped as they were reached), nor begun there: the code runs from here for the first
        time."""
        return not self._recorded and self._position != self._in_flight_at

    def following(self) -> wf.HistoryEvent | None:
        """The event recorded at the next call's position, if any."""
        return self._recorded.get(self._position)

    def mismatch(
        self,
        message: str,
        position: int | None = None,
        recorded: wf.HistoryEvent | None = None,
        found: str = "",
    ) -> NonDeterminismError:
        """The code no longer matches its journal: remembered, so that the run parks.
        `position`, `recorded` and `found` say where and how, for the replay gate."""
        if self.non_determinism is None:
            expected = recorded_call(recorded) if recorded is not None else ""
            self.non_determinism = NonDeterminismError(
                message, position=position, expected=expected, found=found
            )
        return self.non_determinism

    def unreached(self) -> list[str]:
        """Recorded calls the code has not reached: non-deterministic if the run is ending."""
        return [event.step_id for _, event in sorted(self._recorded.items())]

    def attempts(self, step_id: str) -> Attempts:
        return Attempts(
            self._failed_attempts.get(step_id, []), self._started_attempts.get(step_id, 0)
        )

    def take_signals(self, name: str, limit: int | None) -> list[wf.HistoryEvent]:
        """Take the oldest pending signals `name` (at most `limit`): each is taken once."""
        matching = [event for event in self._signals if event.name == name][:limit]
        for event in matching:
            self._signals.remove(event)
        return matching


def _kind(event: wf.HistoryEvent) -> str:
    return wf.EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()


def recorded_call(event: wf.HistoryEvent) -> str:
    """A recorded call as a person reads it: its event's kind and step id."""
    return f"{_kind(event)} {event.step_id!r}"


# The SDK's own calls, by the prefix of their step ids (user calls may not start with "$").
_CALL_KINDS = (
    ("$sleep", "timer"),
    ("$timeout:", "signal timeout"),
    ("$signal:", "signal wait"),
    ("$drain:", "signal drain"),
    ("$approval:", "approval"),
    ("$state:", "set_state"),
    ("$now", "now"),
    ("$uuid", "uuid4"),
)


def call_kind(step_id: str) -> str:
    """A call of the code as a person reads it, from its step id alone: its kind and id."""
    if step_id.endswith(":cancelled"):
        return f"cancellation {step_id!r}"
    kind = next((kind for prefix, kind in _CALL_KINDS if step_id.startswith(prefix)), "step")
    return f"{kind} {step_id!r}"


def payload_size(event: wf.HistoryEvent) -> int:
    """The bytes of an event's payload, inline or held by reference."""
    return len(event.payload.data) or event.payload_ref.size
