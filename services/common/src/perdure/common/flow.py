"""Flow settings checked: the one spelling of what a key, a priority, an estimate and a budget
may be, for the gateway (a run's start), history (a remote step's call) and the scheduler (the
tasks history sends and the limits operators set)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.common import errors

MAX_KEYS = 8
MAX_KEY_LENGTH = 200
MAX_AMOUNT = 2**63 - 1
PRIORITIES = range(1, 6)
DEFAULT_PRIORITY = 3
# What a key may not contain: control and format characters, separators other than space.
_UNKEYABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def saturated(amount: int) -> int:
    """An amount for an int64 field: a sum past MAX_AMOUNT (each settled report may exceed its
    estimate, and sums add them up) shows as MAX_AMOUNT, at least that much; what is stored
    stays exact."""
    return min(amount, MAX_AMOUNT)


def check_key(field: str, key: str, empty_ok: bool = False) -> None:
    """A key: 1 to 200 printable characters (`empty_ok`: or none)."""
    if not key and empty_ok:
        return
    if not key or len(key) > MAX_KEY_LENGTH:
        raise errors.invalid_argument(
            f"{field} must be 1 to {MAX_KEY_LENGTH} characters, not {len(key)}"
        )
    if any(unicodedata.category(char) in _UNKEYABLE for char in key):
        raise errors.invalid_argument(
            f"{field} {key[:60]!r} contains a control or format character: use printable text "
            "such as 'tenant:acme'"
        )


def check_keys(field: str, keys: Sequence[str]) -> None:
    """At most 8 distinct keys, each a key."""
    if len(keys) > MAX_KEYS:
        raise errors.invalid_argument(f"{field} holds {len(keys)} keys; at most {MAX_KEYS}")
    if len(set(keys)) != len(keys):
        raise errors.invalid_argument(f"{field} names a key twice")
    for key in keys:
        check_key(f"a key of {field}", key)


def check_usage(field: str, usage: fpb.Usage) -> None:
    """Units and cost, each >= 0."""
    for name in ("units", "cost_micros"):
        if getattr(usage, name) < 0:
            raise errors.invalid_argument(
                f"{field}.{name} must be >= 0, not {getattr(usage, name)}"
            )


def check_budget(field: str, budget: fpb.Budget) -> None:
    """A budget's limits, each >= 0 where set, at least one set."""
    if not (budget.HasField("units") or budget.HasField("cost_micros")):
        raise errors.invalid_argument(f"{field} sets no limit: set units, cost_micros or both")
    for name in ("units", "cost_micros"):
        if budget.HasField(name) and getattr(budget, name) < 0:
            raise errors.invalid_argument(
                f"{field}.{name} must be >= 0, not {getattr(budget, name)}"
            )


def check_run_flow(field: str, flow: fpb.RunFlow) -> None:
    """A run's flow settings (StartWorkflowRequest.flow)."""
    check_keys(f"{field}.keys", flow.keys)
    if flow.priority and flow.priority not in PRIORITIES:
        raise errors.invalid_argument(
            f"{field}.priority must be 1 (first) to 5 (last), or 0 for 3, not {flow.priority}"
        )
    check_key(f"{field}.fairness_key", flow.fairness_key, empty_ok=True)
    if flow.HasField("budget"):
        check_budget(f"{field}.budget", flow.budget)
    if flow.on_budget_exceeded not in fpb.BudgetExceededAction.values():
        raise errors.invalid_argument(
            f"{field}.on_budget_exceeded {flow.on_budget_exceeded} is not a known action"
        )


def check_step_flow(field: str, flow: fpb.StepFlow) -> None:
    """A remote step's flow settings (ScheduleStepRequest.flow)."""
    check_keys(f"{field}.keys", flow.keys)
    if flow.HasField("estimate"):
        check_usage(f"{field}.estimate", flow.estimate)


def priority_of(flow: fpb.RunFlow) -> int:
    """A run's priority, 0 read as the default."""
    return flow.priority or DEFAULT_PRIORITY


def step_usage_json(field: str, usage: fpb.StepUsage) -> dict[str, int | str]:
    """A step's reported usage, checked, as history journals it (events.usage): units and cost
    >= 0, and the model, when named, a key's characters."""
    check_usage(f"{field}.usage", usage.usage)
    check_key(f"{field}.model", usage.model, empty_ok=True)
    value: dict[str, int | str] = {
        "units": usage.usage.units,
        "cost_micros": usage.usage.cost_micros,
    }
    if usage.model:
        value["model"] = usage.model
    return value
