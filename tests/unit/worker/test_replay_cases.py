"""The replay contract (tests/replay/cases/*.json) run against the Python SDK's replay engine:
one task's whole run, in process, with the journal scripted at the session boundary
(JournalCall out, JournalAnswer in) as each case says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, NoReturn, cast

import pytest
from google.protobuf import json_format

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import LeaseLostError
from perdure.worker._runner import run_task
from perdure.worker._session import JournalSession
from perdure.worker._step_task import run_step_task
from tests.replay.contract import Case, all_cases, as_json, differences, read_case
from tests.replay.workflows import REMOTE_STEPS, WORKFLOWS


class ScriptBrokenError(BaseException):
    """The engine made a call the case does not expect (a BaseException: no workflow or step
    code may catch it)."""


class ScriptedSession(JournalSession):
    """The journal as a case scripts it: the load, then each exchange, then the closing call."""

    def __init__(self, case: Case) -> None:
        super().__init__(cast(jgrpc.JournalServiceStub, None))
        self.case = case
        self.loaded = False
        self.answered = 0  # exchanges answered
        self.closed = False
        self.problem: str | None = None

    async def _send_with_retries(self, call: jpb.JournalCall) -> jpb.JournalAnswer:
        if call.HasField("record_heartbeat"):  # timing, not replay: no case lists them
            return jpb.JournalAnswer(record_heartbeat=jpb.RecordHeartbeatResponse())
        if call.HasField("emit_frames"):  # frames are not journaled: no case lists them
            return jpb.JournalAnswer(emit_frames=jpb.EmitFramesResponse())
        expected, answer = self._next()
        if expected is None:
            self._fail(f"the run made a call after its end:\n{_show(call)}")
        problems = differences(expected, call)
        if problems:
            self._fail(
                "the call differs from the case's:\n  "
                + "\n  ".join(problems)
                + f"\nexpected:\n{json.dumps(expected, indent=2)}\ngot:\n{_show(call)}"
            )
        return answer

    def _next(self) -> tuple[dict[str, Any] | None, jpb.JournalAnswer]:
        case = self.case
        if not self.loaded:
            self.loaded = True
            return case.first_call
        if self.answered < len(case.exchanges):
            exchange = case.exchanges[self.answered]
            self.answered += 1
            return exchange.call, exchange.answer
        closing = case.closing_call
        if closing is None or self.closed:
            return None, jpb.JournalAnswer()
        self.closed = True
        [method] = closing
        return closing, json_format.ParseDict({method: {}}, jpb.JournalAnswer())

    def _fail(self, problem: str) -> NoReturn:
        self.problem = self.problem or problem
        raise ScriptBrokenError(problem)


def _show(call: jpb.JournalCall) -> str:
    printed = as_json(call)
    printed.pop("id", None)
    printed.pop("traceContext", None)
    return json.dumps(printed, indent=2)


@pytest.mark.parametrize("path", all_cases(), ids=lambda path: cast(Path, path).stem)
async def test_replay_case(path: Path) -> None:
    case = read_case(path)
    session = ScriptedSession(case)
    try:
        if case.step_task is not None:
            step = case.step_task
            task = tpb.Task(
                workflow_id=step.workflow_id,
                step_id=step.step_id,
                fence=step.fence,
                budget_exceeded=step.budget_exceeded,
            )
            await run_step_task(task, session, REMOTE_STEPS)
        else:
            assert case.load is not None
            info = case.load.workflow
            task = tpb.Task(workflow_id=info.workflow_id, fence=info.fence)
            await run_task(task, session, WORKFLOWS, asyncio.Event(), monotonic=lambda: 0.0)
        stopped = None
    except ScriptBrokenError:
        stopped = None  # reported below, with the case
    except LeaseLostError as error:
        stopped = error
    if session.problem is not None:
        pytest.fail(f"{case.name}: {case.description}\n{session.problem}", pytrace=False)
    missing = [e.call for e in case.exchanges[session.answered :]]
    assert not missing, f"{case.name}: the run ended before the expected calls {missing}"
    kind = case.outcome["kind"]
    assert (stopped is not None) == (kind == "leaseLost"), f"{case.name}: ended by {stopped!r}"
    if case.closing_call is not None:
        assert session.closed, f"{case.name}: the run ended without {case.closing_call}"


def test_every_case_names_a_catalogued_workflow_or_says_it_does_not() -> None:
    for path in all_cases():
        case = read_case(path)
        if case.step_task is not None:
            assert case.workflow in REMOTE_STEPS, path.name
            continue
        parked_unknown = case.outcome.get("failure", {}).get("type") == "UnknownWorkflowType"
        assert (case.workflow in WORKFLOWS) != parked_unknown, path.name


def record(**fields: Any) -> jpb.JournalCall:
    return jpb.JournalCall(record_step=jpb.RecordStepRequest(**fields))


def test_a_call_matches_on_the_fields_the_case_lists() -> None:
    actual = record(workflow_id="wf-1", fence=3, step_id="a", position=0, attempt=2)
    assert differences({"recordStep": {"stepId": "a", "fence": "3", "position": 0}}, actual) == []
    assert differences({"recordStep": {"attempt": 1}}, actual) == [
        ".recordStep.attempt: expected 1, got 2"
    ]
    assert differences({"startTimer": {}}, actual) == [".startTimer: expected {}, got nothing"]


def test_null_means_unset_or_default() -> None:
    failed = record(step_id="a", failure=wf.Failure(type="E"))
    assert differences({"recordStep": {"retryDelay": None, "output": None}}, failed) == []
    failed.record_step.retry_delay.FromSeconds(1)
    assert differences({"recordStep": {"retryDelay": None}}, failed) == [
        ".recordStep.retryDelay: expected unset, got '1s'"
    ]
    assert differences({"recordStep": {"position": None}}, failed) == []


def test_lists_match_whole() -> None:
    consume = jpb.JournalCall(consume_signals=jpb.ConsumeSignalsRequest(event_ids=[2, 4]))
    assert differences({"consumeSignals": {"eventIds": [2, 4]}}, consume) == []
    assert differences({"consumeSignals": {"eventIds": [2]}}, consume) == [
        ".consumeSignals.eventIds: expected ['2'], got ['2', '4']"
    ]
