"""A task's flow settings for the scheduler (TaskFlow), from its run's and its step's."""

from __future__ import annotations

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.common.flow import priority_of
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb


def run_flow_bytes(flow: fpb.RunFlow | None) -> bytes | None:
    """A start's flow settings as the run keeps them (None: it has none)."""
    return None if flow is None else flow.SerializeToString(deterministic=True)


def run_flow_status(flow: bytes | None) -> fpb.RunFlowStatus | None:
    """What describe shows of a run's flow settings (the gateway adds its budget's use)."""
    if flow is None:
        return None
    return fpb.RunFlowStatus(settings=fpb.RunFlow.FromString(flow))


def task_flow(run_flow: bytes | None, step_flow: bytes | None, step_id: str) -> spb.TaskFlow | None:
    """The TaskFlow of a scheduling request: for the run's own task its keys, priority,
    fairness key and budget; for a remote step's task the step's keys, its estimate, and the
    run's keys beside the step's for budgets. None when neither has settings."""
    if run_flow is None and step_flow is None:
        return None
    run = fpb.RunFlow.FromString(run_flow or b"")
    task = spb.TaskFlow(
        priority=priority_of(run),
        fairness_key=run.fairness_key,
        on_budget_exceeded=run.on_budget_exceeded,
    )
    if not step_id:
        task.keys.extend(run.keys)
        task.budget_keys.extend(run.keys)
        if run.HasField("budget"):
            task.run_budget.CopyFrom(run.budget)
        return task
    step = fpb.StepFlow.FromString(step_flow or b"")
    task.keys.extend(step.keys)
    task.budget_keys.extend(dict.fromkeys([*run.keys, *step.keys]))
    if step.HasField("estimate"):
        task.estimate.CopyFrom(step.estimate)
    return task
