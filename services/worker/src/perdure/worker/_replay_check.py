"""The replay gate's check of one run: its recorded history replayed against workflow code by
the worker's own replay engine (WorkflowContext, Replay, the runner's _execute), with no step
run and nothing recorded (docs/worker-protocol.md §25).

Recorded outcomes are served from the history. The first call the journal does not hold (a
record the engine would send) is the run's frontier: the check stops there and passes, as it
does where the code would wait. A call that does not match the recorded one is
non-determinism, reported with its position, the recorded call and the code's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from types import ModuleType
from typing import Any, Literal, cast

from google.protobuf.message import Message

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker.__main__ import find_marked
from perdure.worker._context import WorkflowContext
from perdure.worker._errors import NonDeterminismError
from perdure.worker._history import History
from perdure.worker._journal import JournalClient
from perdure.worker._payload import from_payload
from perdure.worker._registry import WorkflowFunction, workflow_name, workflow_retry
from perdure.worker._replay import call_kind, recorded_call
from perdure.worker._runner import _execute
from perdure.worker._session import JournalSession

# How long one run's code may take to reach its frontier or end: replay runs no step, so only
# code that waits on something other than a durable call comes near it.
CHECK_SECONDS = 60.0
# Events that are the outcome or the attempts of a call, never the call itself.
_NOT_A_CALL = (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)

Outcome = Literal["passed", "non_deterministic", "skipped", "error"]


@dataclass(frozen=True)
class Verdict:
    """How one run's history replayed against the code."""

    workflow_id: str
    run_id: str
    workflow_type: str
    outcome: Outcome
    detail: str  # passed: where the check stopped; otherwise what went wrong
    position: int | None = None  # non_deterministic: the call where code and journal part
    expected: str = ""  # the call the journal recorded there ("" if none)
    found: str = ""  # the code's call there, or how the code ended

    @property
    def failed(self) -> bool:
        return self.outcome in ("non_deterministic", "error")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Frontier(BaseException):
    """The code made a call the journal does not hold (a BaseException, as no workflow code
    may catch it): the check stops here."""

    def __init__(self, request: Message) -> None:
        step_id = getattr(request, "step_id", "")
        position = getattr(request, "position", None)
        where = f" #{position}" if position is not None else ""
        super().__init__(f"reached the frontier at{where}: {call_kind(step_id)}, not recorded")


class _Unreplayable(BaseException):
    """The history lacks what the replay needs (a BaseException: the code's own `except
    Exception` must not take it for a failure of its own)."""


class _RecordedJournal(JournalClient):
    """A run's journal as its history holds it: payloads are inline, and any record the code
    would make (an attempt's start, a timer, a consumed signal...) is the frontier."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(cast(JournalSession, None), workflow_id, fence=0)

    async def call(self, request: Any) -> Any:
        raise _Frontier(request)

    async def payload_of(self, event: wf.HistoryEvent) -> Payload:
        if event.HasField("payload_ref"):
            raise _Unreplayable(
                f"event {event.event_id} holds its payload by reference: save histories "
                "through the public API, which gives payloads inline"
            )
        return event.payload


async def check_run(workflows: Mapping[str, WorkflowFunction], history: History) -> Verdict:
    """Replay `history` against the code of its type in `workflows`; no step runs."""
    info = history.workflow
    verdict = partial(Verdict, info.workflow_id, info.run_id, info.workflow_type)
    fn = workflows.get(info.workflow_type)
    if fn is None:
        return verdict("skipped", f"type {info.workflow_type!r} is not in the code given")
    loaded = jpb.LoadJournalResponse(workflow=info, events=history.events)
    loaded.now.FromDatetime(datetime.now(UTC))  # recorded timers due by now have fired
    if not loaded.workflow.HasField("input"):
        started = [e for e in history.events if e.event_type == wf.EVENT_TYPE_WORKFLOW_STARTED]
        if started:
            loaded.workflow.input.CopyFrom(started[0].payload)
    ctx = WorkflowContext(loaded, _RecordedJournal(info.workflow_id), workflow_retry(fn))
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            outcome, value = await _execute(fn, ctx, from_payload(loaded.workflow.input))
    except _Frontier as frontier:
        if ctx.non_determinism is not None:  # the code caught it and went on
            return _non_deterministic(verdict, ctx.non_determinism)
        return verdict("passed", str(frontier))
    except TimeoutError:
        return verdict("error", f"the code neither ended nor waited within {CHECK_SECONDS:g}s")
    except _Unreplayable as error:
        return verdict("error", str(error))
    if outcome != "park":
        return verdict("passed", _ended(outcome, value))
    if ctx.non_determinism is not None:
        return _non_deterministic(verdict, ctx.non_determinism)
    # The code ended without reaching every recorded call.
    first = ctx.unconsumed_steps()[0]
    event = next(
        e for e in history.events if e.step_id == first and e.event_type not in _NOT_A_CALL
    )
    found = "the end of the workflow"
    return verdict("non_deterministic", value.message, event.position, recorded_call(event), found)


def _non_deterministic(verdict: Callable[..., Verdict], error: NonDeterminismError) -> Verdict:
    return verdict("non_deterministic", str(error), error.position, error.expected, error.found)


def _ended(outcome: str, value: Any) -> str:
    if outcome == "suspend":
        kind = wf.WaitKind.Name(value.kind).removeprefix("WAIT_KIND_").lower()
        return f"replayed up to its wait ({kind} {value.name!r})"
    if outcome == "failure":
        return f"replayed to its end (failed: {value.type})"
    return f"replayed to its end ({outcome.replace('_', ' ')})"


def workflows_in(*sources: ModuleType | WorkflowFunction) -> dict[str, WorkflowFunction]:
    """The workflows of modules (their @workflow functions, as `perdure worker --module` finds
    them) and of @workflow functions, by type; ValueError on anything else or a type twice."""
    found: dict[str, WorkflowFunction] = {}
    for source in sources:
        functions = (
            find_marked(source, workflow_name) if isinstance(source, ModuleType) else [source]
        )
        for fn in functions:
            name = workflow_name(fn)
            if name is None:
                raise ValueError(f"{fn!r} is not a @workflow function")
            if found.get(name, fn) is not fn:
                raise ValueError(f"two workflows are registered as {name!r}")
            found[name] = fn
    return found
