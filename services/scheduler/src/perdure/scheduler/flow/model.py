"""Flow control's records: a task's settings, a key's limits and buckets, a budget's state,
and a candidate for a grant."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

WAIT = "wait"
FAIL = "fail"
DEFAULT_PRIORITY = 3
# A rate's burst: a tenth of a second of requests (at least one), ten seconds of units.
REQUEST_BURST_SECONDS = 0.1
UNIT_BURST_SECONDS = 10.0


class Scope(StrEnum):
    """What a budget applies to."""

    NAMESPACE = "namespace"
    KEY = "key"
    RUN = "run"


@dataclass(frozen=True)
class TaskFlow:
    """A task's flow settings, as stored with it (the `flow` column's JSON)."""

    namespace: str
    keys: tuple[str, ...] = ()
    budget_keys: tuple[str, ...] = ()
    priority: int = DEFAULT_PRIORITY
    fairness_key: str = ""
    estimate_units: int | None = None  # None: the task reserves nothing
    estimate_cost: int = 0
    on_budget_exceeded: str = WAIT

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "keys": list(self.keys),
            "budget_keys": list(self.budget_keys),
            "estimate_units": self.estimate_units,
            "estimate_cost": self.estimate_cost,
            "on_budget_exceeded": self.on_budget_exceeded,
        }

    @classmethod
    def from_row(cls, flow: dict[str, Any], priority: int, fairness_key: str) -> TaskFlow:
        return cls(
            namespace=flow["namespace"],
            keys=tuple(flow["keys"]),
            budget_keys=tuple(flow["budget_keys"]),
            priority=priority,
            fairness_key=fairness_key,
            estimate_units=flow["estimate_units"],
            estimate_cost=flow["estimate_cost"],
            on_budget_exceeded=flow["on_budget_exceeded"],
        )

    @property
    def reserves(self) -> bool:
        return self.estimate_units is not None


@dataclass(frozen=True)
class RunBudget:
    """A run's own budget, from its start."""

    units: int | None
    cost: int | None


@dataclass
class KeyLimit:
    """A key's limits and the state of its rate buckets (refilled to `now`)."""

    key: str
    max_runs: int | None = None
    max_steps: int | None = None
    requests_per_second: float | None = None
    units_per_minute: int | None = None
    fairness_weight: int | None = None
    request_tokens: float = 0.0
    unit_tokens: float = 0.0
    refilled_at: datetime | None = None
    # Leased now: workflow tasks, step tasks.
    runs_in_flight: int = 0
    steps_in_flight: int = 0

    @property
    def request_burst(self) -> float:
        """The most requests granted at once: a tenth of a second's, at least one."""
        return max(1.0, (self.requests_per_second or 0) * REQUEST_BURST_SECONDS)

    @property
    def unit_burst(self) -> float:
        """The most units granted at once: ten seconds' worth."""
        return (self.units_per_minute or 0) / 60 * UNIT_BURST_SECONDS

    def refill(self, now: datetime) -> None:
        """Add what the rates allow since the last refill, up to each bucket's burst."""
        if self.refilled_at is None:  # never drawn from: full
            elapsed = math.inf
        else:
            elapsed = max((now - self.refilled_at).total_seconds(), 0.0)
        if self.requests_per_second is not None:
            added = elapsed * self.requests_per_second
            self.request_tokens = min(self.request_burst, self.request_tokens + added)
        if self.units_per_minute is not None:
            added = elapsed * self.units_per_minute / 60
            self.unit_tokens = min(self.unit_burst, self.unit_tokens + added)
        self.refilled_at = max(now, self.refilled_at or now)


@dataclass
class BudgetState:
    """A budget, its period rolled over to now, locked for this claim."""

    scope: Scope
    name: str
    limit_units: int | None
    limit_cost: int | None
    reserved_units: int = 0
    reserved_cost: int = 0
    spent_units: int = 0
    spent_cost: int = 0
    refusals: int = 0

    @property
    def ref(self) -> str:
        """The budget as a reservation names it."""
        return f"{self.scope}:{self.name}"

    def room_for(self, units: int, cost: int) -> str | None:
        """Why `units` and `cost` more do not fit (None: they fit)."""
        if self.limit_units is not None:
            held = self.reserved_units + self.spent_units
            if held + units > self.limit_units:
                return (
                    f"{self.describe()} has {max(self.limit_units - held, 0)} of "
                    f"{self.limit_units} units left, and the step's estimate is {units}"
                )
        if self.limit_cost is not None:
            held = self.reserved_cost + self.spent_cost
            if held + cost > self.limit_cost:
                return (
                    f"{self.describe()} has {max(self.limit_cost - held, 0)} of "
                    f"{self.limit_cost} cost micros left, and the step's estimate is {cost}"
                )
        return None

    def describe(self) -> str:
        if self.scope is Scope.NAMESPACE:
            return "the namespace's budget"
        if self.scope is Scope.KEY:
            return f"the budget of key {self.name!r}"
        return "the run's budget"


@dataclass
class Candidate:
    """A task the flow claim locked, which admission may grant."""

    workflow_id: str
    step_id: str
    run_number: int
    flow: TaskFlow | None  # None: a task with no flow settings (fairness key "", priority 3)
    fairness_key: str
    priority: int
    expired: bool  # its lease expired: a take-over
    due_at: datetime
    rank: int = 0  # its place among its fairness key's candidates, from 0
    last_turn: int = 0  # its fairness key's last grant
    weight: int = 1  # its fairness key's weight

    @property
    def is_run(self) -> bool:
        return self.step_id == ""


@dataclass
class Decision:
    """A candidate admitted: granted, with its reservation, or with the budget it exceeds."""

    candidate: Candidate
    reserved: list[str] = field(default_factory=list)  # the budgets it holds against
    budget_exceeded: str = ""  # non-empty: granted only to fail (the run chose to fail)

    @property
    def reserves(self) -> bool:
        """Whether its grant makes a reservation (a step with an estimate, not refused)."""
        flow = self.candidate.flow
        return flow is not None and flow.reserves and not self.budget_exceeded
