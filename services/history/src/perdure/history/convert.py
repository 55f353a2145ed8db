"""Conversions between history rows and API messages."""

from __future__ import annotations

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.convert import python_to_value, timestamp
from perdure.history.store import PAYLOAD_EVENTS, Row


def failure_to_dict(failure: wf.Failure) -> dict[str, str]:
    """A Failure as a jsonb-ready dict."""
    return {"type": failure.type, "message": failure.message, "stack_trace": failure.stack_trace}


def dict_to_failure(data: dict[str, str] | None) -> wf.Failure | None:
    """A stored failure dict as a Failure message."""
    if data is None:
        return None
    return wf.Failure(
        type=data.get("type", ""),
        message=data.get("message", ""),
        stack_trace=data.get("stack_trace", ""),
    )


def workflow_info(row: Row) -> wf.WorkflowInfo:
    """A workflows row as WorkflowInfo."""
    return wf.WorkflowInfo(
        workflow_id=row["workflow_id"],
        workflow_type=row["workflow_type"],
        task_queue=row["task_queue"],
        status=f"WORKFLOW_STATUS_{row['status']}",
        input=python_to_value(row["input"]),
        result=python_to_value(row["result"]) if row["status"] == "COMPLETED" else None,
        failure=dict_to_failure(row["failure"]),
        create_time=timestamp(row["created_at"]),
        update_time=timestamp(row["updated_at"]),
        close_time=timestamp(row["closed_at"]),
        fence=row["fence"],
        event_count=row["event_count"],
    )


def history_event(row: Row) -> wf.HistoryEvent:
    """An events row as HistoryEvent."""
    return wf.HistoryEvent(
        event_id=row["event_id"],
        event_type=f"EVENT_TYPE_{row['event_type']}",
        event_time=timestamp(row["created_at"]),
        fence=row["fence"],
        step_id=row["step_id"] or "",
        step_name=row["step_name"] or "",
        position=row["position"] or 0,
        payload=python_to_value(row["payload"]) if row["event_type"] in PAYLOAD_EVENTS else None,
        failure=dict_to_failure(row["failure"]),
        attempt=row["attempt"] or 0,
    )


def step_info(row: Row) -> wf.StepInfo:
    """A step outcome event row as StepInfo."""
    succeeded = row["event_type"] == "STEP_COMPLETED"
    return wf.StepInfo(
        step_id=row["step_id"],
        name=row["step_name"],
        position=row["position"],
        succeeded=succeeded,
        output=python_to_value(row["payload"]) if succeeded else None,
        failure=dict_to_failure(row["failure"]),
        attempts=row["attempt"] or 1,
        complete_time=timestamp(row["created_at"]),
        fence=row["fence"],
    )
