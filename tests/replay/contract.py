"""The replay contract's rules, as the Python runner applies them (tests/replay/README.md is
the text every runner follows): reading a case, the call it expects to close the run, and
whether a call the engine made matches the one a case expects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from perdure.api.worker.v1 import journal_service_pb2 as jpb

CASES = Path(__file__).parent / "cases"

# An outcome's kind -> the closing call's field, and the outcome field carried in it.
_CLOSING = {
    "suspended": ("suspendWorkflow", "wait", "wait"),
    "completed": ("finishWorkflow", "result", "result"),
    "failed": ("finishWorkflow", "failure", "failure"),
    "cancelled": ("finishWorkflow", "cancelled", "failure"),
    "parked": ("finishWorkflow", "park", "failure"),
    "continuedAsNew": ("finishWorkflow", "continueAsNew", "continueAsNew"),
}
# Kinds that end the run without a closing call: "none" makes no call after the exchanges (a
# run loaded closed, a step task), "leaseLost" stops at an answer that the lease is gone.
WITHOUT_CLOSING_CALL = ("none", "leaseLost")


@dataclass(frozen=True)
class Exchange:
    """One call the engine must make, and the answer it gets."""

    call: dict[str, Any]
    answer: jpb.JournalAnswer


@dataclass(frozen=True)
class StepTask:
    """A remote step's task: the step it leases, and its LoadStep answer."""

    workflow_id: str
    step_id: str
    fence: int
    load: jpb.LoadStepResponse
    budget_exceeded: str = ""  # Task.budget_exceeded: the handler must not run (§27)


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    workflow: str  # a catalogued workflow, or remote step type for a step task
    load: jpb.LoadJournalResponse | None  # a workflow task's (else: step_task)
    step_task: StepTask | None
    exchanges: list[Exchange]
    outcome: dict[str, Any]

    @property
    def first_call(self) -> tuple[dict[str, Any], jpb.JournalAnswer]:
        """The load the engine must call first, and its answer."""
        if self.step_task is not None:
            task = self.step_task
            request = {"workflowId": task.workflow_id, "stepId": task.step_id, "fence": task.fence}
            return {"loadStep": request}, jpb.JournalAnswer(load_step=task.load)
        assert self.load is not None
        info = self.load.workflow
        request = {"workflowId": info.workflow_id, "fence": info.fence}
        return {"loadJournal": request}, jpb.JournalAnswer(load_journal=self.load)

    @property
    def closing_call(self) -> dict[str, Any] | None:
        """The JournalCall (proto JSON, as expected) that must end the run, if any."""
        kind = self.outcome["kind"]
        if kind in WITHOUT_CLOSING_CALL:
            return None
        method, field, key = _CLOSING[kind]
        request = {field: self.outcome.get(key, {})}
        request.update({k: self.outcome[k] for k in ("workflowId", "fence") if k in self.outcome})
        return {method: request}


def read_case(path: Path) -> Case:
    raw = json.loads(path.read_text(encoding="utf-8"))
    unknown = set(raw) - {"description", "workflow", "load", "stepTask", "exchanges", "outcome"}
    assert not unknown, f"{path.name}: unknown keys {sorted(unknown)}"
    assert ("load" in raw) != ("stepTask" in raw), f"{path.name}: a load or a stepTask"
    load = step_task = None
    if "load" in raw:
        load = json_format.ParseDict(raw["load"], jpb.LoadJournalResponse())
        if not load.workflow.workflow_type:
            load.workflow.workflow_type = raw["workflow"]
    else:
        task = raw["stepTask"]
        loaded = json_format.ParseDict(task["load"], jpb.LoadStepResponse())
        if not loaded.step_type:
            loaded.step_type = raw["workflow"]
        step_task = StepTask(
            task["workflowId"],
            task["stepId"],
            int(task["fence"]),
            loaded,
            task.get("budgetExceeded", ""),
        )
    exchanges = []
    for exchange in raw["exchanges"]:
        call = exchange["call"]
        [method] = call
        answer = json_format.ParseDict(exchange.get("answer", {method: {}}), jpb.JournalAnswer())
        exchanges.append(Exchange(call, answer))
    kind = raw["outcome"]["kind"]
    assert kind in (*_CLOSING, *WITHOUT_CLOSING_CALL), f"{path.name}: unknown outcome {kind!r}"
    outcome = raw["outcome"]
    return Case(path.stem, raw["description"], raw["workflow"], load, step_task, exchanges, outcome)


def all_cases() -> list[Path]:
    return sorted(CASES.glob("*.json"))


def as_json(message: Any) -> dict[str, Any]:
    """A message in proto JSON, every field of no presence printed (0, "", false, [])."""
    printed: dict[str, Any] = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True
    )
    return printed


def differences(expected: dict[str, Any], actual: jpb.JournalCall) -> list[str]:
    """Where `actual` differs from the call a case expects: every field the case lists must
    be equal (after both are read as JournalCall, so 3 and "3" are one int64), a field listed
    as null must be unset or default, and fields the case leaves out are not compared."""
    normal = as_json(json_format.ParseDict(_without_nulls(expected), jpb.JournalCall()))
    found: list[str] = []
    _compare(expected, normal, as_json(actual), "", found)
    return found


_DEFAULTS: tuple[Any, ...] = (0, "0", "", False, [], {}, 0.0)


def _compare(raw: Any, normal: Any, actual: Any, path: str, found: list[str]) -> None:
    if isinstance(raw, dict):
        if not isinstance(actual, dict):
            found.append(f"{path or '.'}: expected {normal!r}, got {actual!r}")
            return
        for key, value in raw.items():
            where = f"{path}.{key}"
            if value is None:
                if actual.get(key, 0) not in _DEFAULTS:
                    found.append(f"{where}: expected unset, got {actual[key]!r}")
            elif key not in actual:
                found.append(f"{where}: expected {value!r}, got nothing")
            else:
                _compare(value, normal[key], actual[key], where, found)
    elif isinstance(raw, list):
        if not isinstance(actual, list) or len(actual) != len(raw):
            found.append(f"{path}: expected {normal!r}, got {actual!r}")
            return
        for index, (item, normal_item, actual_item) in enumerate(
            zip(raw, normal, actual, strict=True)
        ):
            _compare(item, normal_item, actual_item, f"{path}[{index}]", found)
    elif normal != actual:
        found.append(f"{path}: expected {normal!r}, got {actual!r}")


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
