"""`perdure workflow diff A B`: two runs compared step by step, on the client (two journal
reads and two describes). Steps are aligned by position (the order of the code's calls): the
same, different (both outcomes shown), or only in one; then the statuses and results. What a
fork or a reset changed shows as the step it replaced and what follows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.worker._replay import POSITIONED  # the events that hold a position

SHOWN_CHARACTERS = 120  # of an outcome in the text report

_OUTCOMES = (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_STEP_FAILED)


@dataclass(frozen=True)
class Call:
    """One call of a run's code as its journal holds it."""

    step_id: str
    outcome: str  # the output's JSON text, or "failed: <type>: <message>", or the event kind


def _payload_text(payload: Payload) -> str:
    if payload.encoding == "binary/plain":
        return f"<{len(payload.data)} bytes>"
    return payload.data.decode() if payload.data else "null"


def _outcome(event: wf.HistoryEvent) -> str:
    if event.event_type == wf.EVENT_TYPE_STEP_FAILED:
        return f"failed: {event.failure.type}: {event.failure.message}"
    if event.event_type in (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_SIGNAL_CONSUMED):
        return _payload_text(event.payload)
    if event.event_type == wf.EVENT_TYPE_STATE_UPDATED:
        return f"{event.name} = {_payload_text(event.payload)}"
    return wf.EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()


def calls(events: list[wf.HistoryEvent]) -> dict[int, Call]:
    """The calls of a journal by position, each with its outcome (a remote step's once it
    has one)."""
    scheduled: dict[str, int] = {}
    found: dict[int, Call] = {}
    for event in events:
        if event.event_type in _OUTCOMES and event.step_id in scheduled:
            position = scheduled[event.step_id]
            found[position] = Call(event.step_id, _outcome(event))
        elif event.event_type in POSITIONED:
            if event.event_type == wf.EVENT_TYPE_STEP_SCHEDULED:
                scheduled[event.step_id] = event.position
                found[event.position] = Call(event.step_id, "scheduled, no outcome yet")
            else:
                found[event.position] = Call(event.step_id, _outcome(event))
    return found


def _closing(described: api.DescribeWorkflowResponse) -> dict[str, str]:
    info = described.workflow
    status = wf.WorkflowStatus.Name(info.status).removeprefix("WORKFLOW_STATUS_")
    if info.status == wf.WORKFLOW_STATUS_COMPLETED:
        result = _payload_text(info.result)
    elif info.HasField("failure"):
        result = f"{info.failure.type}: {info.failure.message}"
    else:
        result = ""
    return {"status": status, "result": result}


def compare(
    a: tuple[api.DescribeWorkflowResponse, list[wf.HistoryEvent]],
    b: tuple[api.DescribeWorkflowResponse, list[wf.HistoryEvent]],
) -> dict[str, Any]:
    """The report of two runs (each its describe and its journal)."""
    calls_a, calls_b = calls(a[1]), calls(b[1])
    steps = []
    for position in sorted(calls_a.keys() | calls_b.keys()):
        call_a, call_b = calls_a.get(position), calls_b.get(position)
        if call_a is None or call_b is None:
            status = "only_in_a" if call_b is None else "only_in_b"
        else:
            status = "same" if call_a == call_b else "different"
        steps.append(
            {
                "position": position,
                "status": status,
                "step_id_a": call_a.step_id if call_a else None,
                "step_id_b": call_b.step_id if call_b else None,
                "a": call_a.outcome if call_a else None,
                "b": call_b.outcome if call_b else None,
            }
        )
    close_a, close_b = _closing(a[0]), _closing(b[0])
    return {
        "a": {"workflow_id": a[0].workflow.workflow_id, "run_id": a[0].workflow.run_id},
        "b": {"workflow_id": b[0].workflow.workflow_id, "run_id": b[0].workflow.run_id},
        "steps": steps,
        "status": {"a": close_a["status"], "b": close_b["status"]},
        "result": {"a": close_a["result"], "b": close_b["result"]},
        "same": all(s["status"] == "same" for s in steps) and close_a == close_b,
    }


def _short(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 1] + "…"


def render(report: dict[str, Any]) -> str:
    """The report as text, one line a step (two more for a difference)."""
    a, b = report["a"], report["b"]
    lines = [
        f"A: {a['workflow_id']} (run {a['run_id']})",
        f"B: {b['workflow_id']} (run {b['run_id']})",
    ]
    for step in report["steps"]:
        name = step["step_id_a"] or step["step_id_b"]
        if step["step_id_a"] and step["step_id_b"] and step["step_id_a"] != step["step_id_b"]:
            name = f"{step['step_id_a']} / {step['step_id_b']}"
        label = step["status"].replace("_", " ")
        lines.append(f"  #{step['position']:<4} {name:<30} {label}")
        if step["status"] == "different":
            lines += [f"        A: {_short(step['a'])}", f"        B: {_short(step['b'])}"]
    for field in ("status", "result"):
        pair = report[field]
        same = "same" if pair["a"] == pair["b"] else "different"
        lines.append(f"{field}: {same}")
        lines += [f"  A: {_short(pair['a'])}", f"  B: {_short(pair['b'])}"]
    return "\n".join(lines)


def run_diff(client: Client, a: tuple[str, str], b: tuple[str, str], as_json: bool) -> int:
    """Print the report of runs `a` and `b` (workflow id, run id); exit 0 either way."""
    sides = [
        (client.describe(workflow_id, run_id=run_id), list(client.history(workflow_id, 0, run_id)))
        for workflow_id, run_id in (a, b)
    ]
    report = compare(sides[0], sides[1])
    print(json.dumps(report, indent=2) if as_json else render(report))
    return 0
