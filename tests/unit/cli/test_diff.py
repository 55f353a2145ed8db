"""`perdure workflow diff`: two journals aligned by the position of each call, a remote step's
outcome counted at its call, then the statuses and results."""

from __future__ import annotations

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.cli.diff_cmd import compare, render
from perdure.common.payload import json_payload


def _done(step_id: str, position: int, value: str) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_type=wf.EVENT_TYPE_STEP_COMPLETED,
        step_id=step_id,
        position=position,
        payload=json_payload(value),
    )


def _run(workflow_id: str, result: str) -> api.DescribeWorkflowResponse:
    info = wf.WorkflowInfo(
        workflow_id=workflow_id,
        run_id=f"{workflow_id}-run",
        status=wf.WORKFLOW_STATUS_COMPLETED,
        result=json_payload(result),
    )
    return api.DescribeWorkflowResponse(workflow=info)


def test_steps_are_aligned_by_position_and_remote_outcomes_count_at_their_call() -> None:
    started = wf.HistoryEvent(event_type=wf.EVENT_TYPE_WORKFLOW_STARTED)
    scheduled = wf.HistoryEvent(
        event_type=wf.EVENT_TYPE_STEP_SCHEDULED, step_id="resize", position=1
    )
    resized = wf.HistoryEvent(
        event_type=wf.EVENT_TYPE_STEP_COMPLETED, step_id="resize", payload=json_payload("7")
    )
    a = [started, _done("fetch", 0, "1"), scheduled, resized, _done("sum", 2, "8")]
    b = [started, _done("fetch", 0, "1"), scheduled, _done("sum", 2, "9"), _done("more", 3, "0")]

    report = compare((_run("a", "8"), a), (_run("b", "9"), b))

    assert [(s["position"], s["status"]) for s in report["steps"]] == [
        (0, "same"),
        (1, "different"),  # b's remote step has no outcome yet
        (2, "different"),
        (3, "only_in_b"),
    ]
    assert report["steps"][1]["a"] == "7" and "no outcome" in report["steps"][1]["b"]
    assert report["result"] == {"a": "8", "b": "9"} and not report["same"]
    text = render(report)
    assert "#2" in text and "A: 8" in text and "B: 9" in text and "only in b" in text


def test_a_run_compared_with_itself_is_the_same() -> None:
    events = [_done("fetch", 0, '{"n": 1}')]
    report = compare((_run("a", "1"), events), (_run("a", "1"), events))
    assert report["same"] and "different" not in render(report)
