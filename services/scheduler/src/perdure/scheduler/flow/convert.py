"""Flow settings between their messages and the scheduler's records, checked on the way in."""

from __future__ import annotations

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.common import errors, namespaces
from perdure.common.flow import (
    PRIORITIES,
    check_budget,
    check_key,
    check_keys,
    check_usage,
    saturated,
)
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.scheduler.flow.budgets import BudgetRow
from perdure.scheduler.flow.model import FAIL, WAIT, KeyLimit, RunBudget, TaskFlow
from perdure.scheduler.model import Usage

PERIODS: dict[int, str] = {
    fpb.BUDGET_PERIOD_UNSPECIFIED: "none",
    fpb.BUDGET_PERIOD_NONE: "none",
    fpb.BUDGET_PERIOD_HOUR: "hour",
    fpb.BUDGET_PERIOD_DAY: "day",
    fpb.BUDGET_PERIOD_WEEK: "week",
    fpb.BUDGET_PERIOD_MONTH: "month",
}
_PERIOD_VALUES = {name: value for value, name in PERIODS.items() if value}


def task_flow_of(task: spb.TaskRequest) -> TaskFlow:
    """A task's flow settings from history's request, checked."""
    flow = task.flow
    check_keys("flow.keys", flow.keys)
    check_keys("flow.budget_keys", flow.budget_keys)
    if flow.priority not in PRIORITIES:
        raise errors.invalid_argument(f"flow.priority must be 1 to 5, not {flow.priority}")
    check_key("flow.fairness_key", flow.fairness_key, empty_ok=True)
    if flow.HasField("estimate"):
        check_usage("flow.estimate", flow.estimate)
    return TaskFlow(
        namespace=namespaces.namespace_of(task.task_queue),
        keys=tuple(flow.keys),
        budget_keys=tuple(flow.budget_keys),
        priority=flow.priority,
        fairness_key=flow.fairness_key,
        estimate_units=flow.estimate.units if flow.HasField("estimate") else None,
        estimate_cost=flow.estimate.cost_micros,
        on_budget_exceeded=FAIL
        if flow.on_budget_exceeded == fpb.BUDGET_EXCEEDED_ACTION_FAIL
        else WAIT,
    )


def run_budget_of(flow: spb.TaskFlow) -> RunBudget:
    """A run's own budget, checked."""
    check_budget("flow.run_budget", flow.run_budget)
    budget = flow.run_budget
    return RunBudget(
        units=budget.units if budget.HasField("units") else None,
        cost=budget.cost_micros if budget.HasField("cost_micros") else None,
    )


def usage_of(usage: fpb.Usage) -> Usage:
    """What a worker reported a step used, checked."""
    check_usage("task_done.usage", usage)
    return Usage(usage.units, usage.cost_micros)


def key_limit_of(limit: admin.FlowLimit) -> KeyLimit:
    """An operator's limits on a key, checked."""
    check_key("limit.key", limit.key)
    for name in ("max_runs", "max_steps"):
        if limit.HasField(name) and getattr(limit, name) < 0:
            raise errors.invalid_argument(f"limit.{name} must be >= 0, not {getattr(limit, name)}")
    rps = limit.requests_per_second if limit.HasField("requests_per_second") else None
    if rps is not None and not (0 < rps <= 1_000_000):
        raise errors.invalid_argument(
            f"limit.requests_per_second must be above 0 and at most 1,000,000, not {rps}"
        )
    upm = limit.units_per_minute if limit.HasField("units_per_minute") else None
    if upm is not None and upm <= 0:
        raise errors.invalid_argument(f"limit.units_per_minute must be above 0, not {upm}")
    weight = limit.fairness_weight if limit.HasField("fairness_weight") else None
    if weight is not None and not 1 <= weight <= 1000:
        raise errors.invalid_argument(f"limit.fairness_weight must be 1 to 1000, not {weight}")
    limits = [rps, upm, weight] + [
        getattr(limit, n) if limit.HasField(n) else None for n in ("max_runs", "max_steps")
    ]
    if all(value is None for value in limits):
        raise errors.invalid_argument(
            "limit sets nothing: set max_runs, max_steps, requests_per_second, "
            "units_per_minute or fairness_weight (DeleteFlowLimit removes a key's limits)"
        )
    return KeyLimit(
        key=limit.key,
        max_runs=limit.max_runs if limit.HasField("max_runs") else None,
        max_steps=limit.max_steps if limit.HasField("max_steps") else None,
        requests_per_second=rps,
        units_per_minute=upm,
        fairness_weight=weight,
    )


def flow_limit(limit: KeyLimit) -> admin.FlowLimit:
    """A key's limits as the API shows them."""
    message = admin.FlowLimit(
        key=limit.key,
        runs_in_flight=limit.runs_in_flight,
        steps_in_flight=limit.steps_in_flight,
    )
    for name in ("max_runs", "max_steps", "requests_per_second", "units_per_minute"):
        if (value := getattr(limit, name)) is not None:
            setattr(message, name, value)
    if limit.fairness_weight is not None:
        message.fairness_weight = limit.fairness_weight
    return message


def period_of(period: int) -> str:
    """A budget period's stored name, checked."""
    if period not in PERIODS:
        raise errors.invalid_argument(f"budget.period {period} is not a known period")
    return PERIODS[period]


def budget_info(row: BudgetRow) -> admin.BudgetInfo:
    """A budget with its usage, as the API shows it."""
    info = admin.BudgetInfo(
        key=row.name if row.scope == "key" else "",
        workflow_id=namespaces.split(row.name)[1] if row.scope == "run" else "",
        period=_PERIOD_VALUES[row.period],  # type: ignore[arg-type]
        reserved=fpb.Usage(
            units=saturated(row.reserved_units), cost_micros=saturated(row.reserved_cost)
        ),
        spent=fpb.Usage(units=saturated(row.spent_units), cost_micros=saturated(row.spent_cost)),
        refusals=row.refusals,
    )
    if row.limit_units is not None:
        info.limit.units = row.limit_units
    if row.limit_cost is not None:
        info.limit.cost_micros = row.limit_cost
    if row.period_start is not None:
        info.period_start.FromDatetime(row.period_start)
    return info
