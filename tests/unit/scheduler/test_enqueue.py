"""A scheduling request's tasks as the scheduler reads them: checked, with their due reason."""

from __future__ import annotations

from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.scheduler.handlers import due_tasks
from perdure.scheduler.model import DueReason, DueTask
from tests.unit.api_errors import assert_invalid, rejected


def request(wake_reason: str, fence_floor: int = 0) -> spb.EnqueueTasksRequest:
    task = spb.TaskRequest(
        workflow_id="wf-1",
        workflow_type="checkout",
        task_queue="q",
        wake_reason=wake_reason,
        fence_floor=fence_floor,
    )
    return spb.EnqueueTasksRequest(tasks=[task])


def test_a_timed_wake_up_keeps_its_reason() -> None:
    [task] = due_tasks(request(wake_reason="retry", fence_floor=4))
    assert task == DueTask("wf-1", "", "checkout", "q", None, DueReason.RETRY, None, 4)


def test_an_unknown_wake_reason_is_refused() -> None:
    error = rejected(lambda: due_tasks(request(wake_reason="whenever")))
    assert_invalid(error, "wake_reason", "timer, signal, retry", "'whenever'")
