"""Conversions between history rows and API messages."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.common.v1.payload_pb2 import Payload, PayloadRef
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import namespaces
from perdure.common.convert import timestamp
from perdure.common.flow import saturated
from perdure.common.text import storable
from perdure.history.model import OPEN_STATUSES, EventType, ParentClosePolicy, RunStatus
from perdure.history.rows import Row, payload_in, payload_of
from perdure.telemetry.propagation import trace_id_of


def failure_to_dict(failure: wf.Failure) -> dict[str, str]:
    """A Failure as a jsonb-ready dict (its text made storable: it is a diagnosis, refusing
    it would lose the failure)."""
    return {
        "type": storable(failure.type),
        "message": storable(failure.message),
        "stack_trace": storable(failure.stack_trace),
    }


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
    # Workers know a run by its qualified id; the public handlers show the public one.
    return wf.WorkflowInfo(
        workflow_id=row["workflow_id"],
        namespace=namespaces.namespace_of(row["workflow_id"]),
        workflow_type=row["workflow_type"],
        task_queue=namespaces.split(row["task_queue"])[1],
        status=f"WORKFLOW_STATUS_{row['status']}",
        input=payload_in(row, "input"),
        result=payload_of(row, "result") if row["status"] == RunStatus.COMPLETED else None,
        failure=dict_to_failure(row["failure"]),
        create_time=timestamp(row["created_at"]),
        update_time=timestamp(row["updated_at"]),
        close_time=timestamp(row["closed_at"]),
        fence=row["fence"],
        event_count=row["event_count"],
        history_bytes=row["history_bytes"],
        wait=_wait(row["wait_kind"], row["wait_name"], row["wait_until"]),
        cancel_requested=row["cancel_requested"],
        trace_id=trace_id_of(row["trace_context"] or {}),
        stuck_time=timestamp(row["stuck_since"]),
        run_id=row["run_id"],
        run_number=row["run_number"],
        previous_run_id=row["previous_run_id"] or "",
        next_run_id=row["next_run_id"] or "",
        build_id=row["build_id"] or "",
        # Where a reset's or a fork's run came from (history/recovery.py).
        reset_from_run_id=row.get("reset_from_run_id") or "",
        forked_from_workflow_id=row.get("forked_from_workflow_id") or "",
        forked_from_run_id=row.get("forked_from_run_id") or "",
        copied_up_to_event_id=row.get("copied_up_to_event_id") or 0,
        # A child's parent, in the same namespace (children.py).
        parent_workflow_id=namespaces.split(row.get("parent_workflow_id") or "")[1],
        parent_run_id=row.get("parent_run_id") or "",
        parent_close_policy=close_policy(row.get("parent_close_policy")),
    )


def close_policy(stored: str | None) -> str | None:
    """A stored parent-close policy as its ParentClosePolicy name (None: the run is no child)."""
    return ParentClosePolicy(stored).proto if stored else None


def _wait(kind: str | None, name: str | None, until: Any) -> wf.Wait | None:
    if kind is None:
        return None
    return wf.Wait(kind=f"WAIT_KIND_{kind}", name=name or "", until=timestamp(until))


def history_event(row: Row) -> wf.HistoryEvent:
    """An events row as HistoryEvent."""
    event = _history_event(row)
    if row["event_type"].startswith(_APPROVAL_EVENTS):
        # An approval's events keep its id in `name` (approvals.py); its name is the call's.
        event.approval_id, event.name = event.name, event.step_name.partition(":")[2]
    return event


_APPROVAL_EVENTS = "APPROVAL_"


def _history_event(row: Row) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=row["event_id"],
        event_type=f"EVENT_TYPE_{row['event_type']}",
        event_time=timestamp(row["created_at"]),
        fence=row["fence"],
        step_id=row["step_id"] or "",
        step_name=row["step_name"] or "",
        position=row["position"] or 0,
        payload=payload_of(row, "payload"),
        payload_ref=_payload_ref(row),
        failure=dict_to_failure(row["failure"]),
        attempt=row["attempt"] or 0,
        due_time=timestamp(row["due_at"]),
        name=row["name"] or "",
        signal_id=row["signal_id"] or "",
        consumed_event_ids=row["consumed"] or [],
        start_time=timestamp(row["started_at"]),
        wait=_wait_from_json(row["wait"]),
        trace_context=row["trace_context"] or {},
        task_queue=namespaces.split(row["task_queue"] or "")[1],
        child_workflow_id=namespaces.split(row.get("child_workflow_id") or "")[1],
        child_run_id=row.get("child_run_id") or "",
        usage=step_usage(row.get("usage")),
    )


def _add_usage(total: fpb.StepUsage, data: dict[str, Any]) -> None:
    total.usage.units = saturated(total.usage.units + data["units"])
    total.usage.cost_micros = saturated(total.usage.cost_micros + data["cost_micros"])
    total.model = data.get("model", total.model)


def step_usage(data: dict[str, Any] | None) -> fpb.StepUsage | None:
    """An event's journaled usage (events.usage) as StepUsage; None when none was reported."""
    if data is None:
        return None
    return fpb.StepUsage(
        usage=fpb.Usage(units=data["units"], cost_micros=data["cost_micros"]),
        model=data.get("model", ""),
    )


def _payload_ref(row: Row) -> PayloadRef | None:
    """The reference of a payload stored by content, in a row read for a worker's load (a row
    read for the public API has its payload inline)."""
    digest = row.get("payload_sha256")
    if digest is None:
        return None
    return PayloadRef(
        sha256=bytes(digest), encoding=row["payload_encoding"], size=row["payload_size"] or 0
    )


def _wait_from_json(data: dict[str, Any] | None) -> wf.Wait | None:
    if data is None:
        return None
    until = datetime.fromisoformat(data["until"]) if data.get("until") else None
    return _wait(data["kind"], data.get("name"), until)


_STEP_EVENTS = frozenset(
    {
        EventType.STEP_SCHEDULED,
        EventType.STEP_COMPLETED,
        EventType.STEP_FAILED,
        EventType.STEP_ATTEMPT_FAILED,
    }
)


def step_infos(events: list[Row], progress: list[Row]) -> list[wf.StepInfo]:
    """Each user step with its status, attempts and timings, from the run's events (oldest
    first) and the progress its attempts reported. Calls named "$..." are the SDK's own."""
    steps: dict[str, wf.StepInfo] = {}
    for row in events:
        if row["event_type"] not in _STEP_EVENTS or row["step_name"].startswith("$"):
            continue
        step = steps.setdefault(row["step_id"], _new_step(row["step_id"], row["step_name"]))
        if row["event_type"] == EventType.STEP_SCHEDULED:  # a remote step, until its worker reports
            step.position = row["position"]
            step.status = wf.STEP_STATUS_RUNNING
            continue
        if not step.HasField("start_time") and row["started_at"] is not None:
            step.start_time.FromDatetime(row["started_at"])
        step.attempts = row["attempt"] or 1
        step.fence = row["fence"]
        if row.get("usage") is not None:  # every attempt's use counts, a failed one's too
            _add_usage(step.usage, row["usage"])
        step.failure.CopyFrom(dict_to_failure(row["failure"]) or wf.Failure())
        step.ClearField("next_retry_time")
        if row["event_type"] == EventType.STEP_ATTEMPT_FAILED:
            step.status = wf.STEP_STATUS_RETRYING
            step.next_retry_time.FromDatetime(row["due_at"])
            continue
        if row["position"] is not None:  # a remote step's outcome keeps its call's position
            step.position = row["position"]
        step.complete_time.FromDatetime(row["created_at"])
        step.succeeded = row["event_type"] == EventType.STEP_COMPLETED
        if step.succeeded:
            step.status = wf.STEP_STATUS_COMPLETED
            step.output.CopyFrom(payload_in(row, "payload"))
            step.ClearField("failure")
        else:
            step.status = wf.STEP_STATUS_FAILED
    for row in progress:
        if row["step_id"].startswith("$"):
            continue
        step = steps.setdefault(row["step_id"], _new_step(row["step_id"], None))
        if step.status in (wf.STEP_STATUS_COMPLETED, wf.STEP_STATUS_FAILED):
            continue
        if row["details"] is not None:
            step.heartbeat_details.CopyFrom(row["details"])
        step.heartbeat_time.FromDatetime(row["updated_at"])
        if row["attempt"] > step.attempts or step.status == wf.STEP_STATUS_UNSPECIFIED:
            step.status = wf.STEP_STATUS_RUNNING
            step.attempts = row["attempt"]
            step.ClearField("next_retry_time")
    return list(steps.values())


def progress_rows(progress: list[dict[str, Any]]) -> list[Row]:
    """The JSON progress array of a run (see store._PROGRESS) with its times as datetimes and
    its details as payloads."""
    return [
        {
            **row,
            "details": _progress_details(row),
            "updated_at": datetime.fromisoformat(row["updated_at"]),
        }
        for row in progress
    ]


def _progress_details(row: dict[str, Any]) -> Payload | None:
    if row["details"] is None:
        return None
    return Payload(encoding=row["details_encoding"], data=base64.b64decode(row["details"]))


def _new_step(step_id: str, name: str | None) -> wf.StepInfo:
    base, _, occurrence = step_id.rpartition("#")
    return wf.StepInfo(step_id=step_id, name=name or (base if occurrence.isdigit() else step_id))


def current_step(row: Row, steps: list[wf.StepInfo]) -> str:
    """What the run is on: its wait, else the step running or being retried."""
    if row["wait_name"]:
        return str(row["wait_name"])
    if row["status"] not in OPEN_STATUSES:
        return ""
    active = (wf.STEP_STATUS_RUNNING, wf.STEP_STATUS_RETRYING)
    return next((step.step_id for step in reversed(steps) if step.status in active), "")


def pending_signals(events: list[Row]) -> list[wf.PendingSignal]:
    """The signals received and not consumed, oldest first."""
    consumed = {
        event_id
        for row in events
        if row["event_type"] == EventType.SIGNAL_CONSUMED
        for event_id in row["consumed"] or []
    }
    return [
        wf.PendingSignal(
            name=row["name"],
            signal_id=row["signal_id"] or "",
            payload=payload_in(row, "payload"),
            receive_time=timestamp(row["created_at"]),
            event_id=row["event_id"],
        )
        for row in events
        if row["event_type"] == EventType.SIGNAL_RECEIVED and row["event_id"] not in consumed
    ]


def published_state(events: list[Row]) -> dict[str, Payload]:
    """The latest value of every key published with ctx.set_state."""
    return {
        row["name"]: payload_in(row, "payload")
        for row in events
        if row["event_type"] == EventType.STATE_UPDATED
    }
