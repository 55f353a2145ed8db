"""Flow control's values (worker-protocol.md §27): concurrency keys, usage and budgets, checked
here once for workflow code (ctx.call) and the clients (start) alike, before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perdure.api.common.v1 import flow_pb2 as fpb

# The contract's limits (flow.proto): keys per run or step, characters per key, int64.
MAX_KEYS = 8
MAX_KEY_LENGTH = 200
INT64_LIMIT = 2**63


def check_amount(what: str, value: object) -> int:
    """`value` as a whole number for an int64 field >= 0; TypeError or ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < INT64_LIMIT:
        raise ValueError(f"{what} must be >= 0 and < 2**63, not {value}")
    return value


def check_key(what: str, key: object) -> str:
    """A key (or fairness key): at most 200 printable characters; "" is the caller's to
    refuse."""
    if not isinstance(key, str):
        raise TypeError(f"{what} must be a str, not {type(key).__name__}")
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise ValueError(f"{what} must be at most {MAX_KEY_LENGTH} printable characters: {key!r}")
    return key


def check_keys(keys: Sequence[str] | None) -> list[str]:
    """Concurrency and rate keys: at most 8, each 1 to 200 printable characters, no two alike."""
    if keys is None:
        return []
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise TypeError(f"keys must be a list of str, not {type(keys).__name__}")
    if len(keys) > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} keys, not {len(keys)}")
    checked = [check_key("a key", key) for key in keys]
    if "" in checked:
        raise ValueError("a key must not be empty")
    if len(set(checked)) != len(checked):
        raise ValueError(f"keys must not repeat: {checked!r}")
    return checked


@dataclass(frozen=True)
class Usage:
    """What a step uses: `units` (tokens, requests, anything counted) and money in
    `cost_micros` (millionths of the budget's currency). Whole numbers >= 0, below 2**63."""

    units: int = 0
    cost_micros: int = 0

    def __post_init__(self) -> None:
        check_amount("units", self.units)
        check_amount("cost_micros", self.cost_micros)

    def to_message(self) -> fpb.Usage:
        return fpb.Usage(units=self.units, cost_micros=self.cost_micros)


@dataclass(frozen=True)
class Budget:
    """A limit on a run's units, money or both; None is no limit on it."""

    units: int | None = None
    cost_micros: int | None = None

    def __post_init__(self) -> None:
        if self.units is not None:
            check_amount("budget units", self.units)
        if self.cost_micros is not None:
            check_amount("budget cost_micros", self.cost_micros)

    def to_message(self) -> fpb.Budget:
        return fpb.Budget(units=self.units, cost_micros=self.cost_micros)


def step_flow(keys: Sequence[str] | None, estimate: Usage | None) -> fpb.StepFlow | None:
    """A remote step's flow settings (ScheduleStepRequest.flow); None when it declares none."""
    checked = check_keys(keys)
    if estimate is not None and not isinstance(estimate, Usage):
        raise TypeError(f"estimate must be a Usage, not {type(estimate).__name__}")
    if not checked and estimate is None:
        return None
    flow = fpb.StepFlow(keys=checked)
    if estimate is not None:
        flow.estimate.CopyFrom(estimate.to_message())
    return flow


# on_budget_exceeded's values, as RunFlow.on_budget_exceeded.
BUDGET_EXCEEDED_ACTIONS = {
    "wait": fpb.BUDGET_EXCEEDED_ACTION_WAIT,
    "fail": fpb.BUDGET_EXCEEDED_ACTION_FAIL,
}
# RunFlow.priority: 1 is served first, 5 last.
PRIORITIES = range(1, 6)


def run_flow(
    keys: Sequence[str] | None = None,
    priority: int | None = None,
    fairness_key: str | None = None,
    budget: Budget | None = None,
    on_budget_exceeded: str | None = None,
) -> fpb.RunFlow | None:
    """A run's flow settings (StartWorkflowRequest.flow); None when it declares none (priority
    3, fairness key "", no budget). TypeError or ValueError for a value the contract refuses."""
    flow = fpb.RunFlow(keys=check_keys(keys))
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int, not {type(priority).__name__}")
        if priority not in PRIORITIES:
            raise ValueError(
                f"priority must be 1 (served first) to 5 (served last), not {priority}"
            )
        flow.priority = priority
    if fairness_key is not None:
        flow.fairness_key = check_key("fairness_key", fairness_key)
    if budget is not None:
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget, not {type(budget).__name__}")
        flow.budget.CopyFrom(budget.to_message())
    if on_budget_exceeded is not None:
        action = BUDGET_EXCEEDED_ACTIONS.get(on_budget_exceeded)
        if action is None:
            raise ValueError(
                f'on_budget_exceeded must be "wait" or "fail", not {on_budget_exceeded!r}'
            )
        flow.on_budget_exceeded = action
    return flow if flow.ByteSize() else None
