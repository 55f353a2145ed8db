"""Admission: which of the candidates a flow claim locked are granted, in fair order, within
every limit, rate and budget that applies. Pure: the claim (claim.py) reads the state under
locks, admits, and writes back what admission changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from perdure.scheduler.flow.model import FAIL, BudgetState, Candidate, Decision, KeyLimit, Scope


@dataclass
class Admission:
    """What one claim grants, and why the rest wait."""

    decisions: list[Decision] = field(default_factory=list)
    # Seconds until a rate lets through a candidate it holds back now (None: none is).
    retry_in: float | None = None
    # Candidates held back, by what held them: "concurrency", "rate", "budget".
    held_back: Counter[str] = field(default_factory=Counter)

    def wait_for(self, seconds: float) -> None:
        self.retry_in = seconds if self.retry_in is None else min(self.retry_in, seconds)


def fair_order(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Take-overs of expired leases first; then by priority; within a priority, round-robin
    across fairness keys (a key of weight w gets w turns per round), starting from the key
    served longest ago; then by due time."""
    return sorted(
        candidates,
        key=lambda c: (
            not c.expired,
            c.priority,
            (c.rank + 1) / c.weight,
            c.last_turn,
            c.due_at,
        ),
    )


def budgets_of(candidate: Candidate) -> list[str]:
    """The budgets a candidate's estimate is reserved against (those that exist, or not): its
    namespace's, each of its budget keys', its run's."""
    assert candidate.flow is not None
    refs = [f"{Scope.NAMESPACE}:"]
    refs += [f"{Scope.KEY}:{key}" for key in candidate.flow.budget_keys]
    refs.append(f"{Scope.RUN}:{candidate.workflow_id}")
    return refs


def admit(
    candidates: list[Candidate],
    limit: int,
    limits: dict[str, KeyLimit],
    budgets: dict[str, BudgetState],
) -> Admission:
    """Grant up to `limit` of the candidates, in fair order, each within its keys' concurrency
    limits (a lease is a lease, whatever it is for). A budget that an estimate does not fit
    holds the step back, or grants it only to fail (its run's choice), ahead of any rate:
    failing runs nothing. A candidate held back by one key's limit does not hold back the
    candidates after it. `limits` and `budgets` are updated in place."""
    admission = Admission()
    for candidate in fair_order(candidates):
        if len(admission.decisions) == limit:
            break
        flow = candidate.flow
        if flow is None:
            admission.decisions.append(Decision(candidate))
            continue
        keyed = [limits[key] for key in flow.keys if key in limits]
        if not _within_concurrency(candidate, keyed):
            admission.held_back["concurrency"] += 1
            continue
        applicable = [budgets[ref] for ref in budgets_of(candidate) if ref in budgets]
        units, cost = flow.estimate_units or 0, flow.estimate_cost
        if flow.reserves:
            exceeded = next(filter(None, (b.room_for(units, cost) for b in applicable)), None)
            if exceeded is not None:
                if flow.on_budget_exceeded != FAIL:
                    admission.held_back["budget"] += 1
                    continue
                for budget in applicable:
                    if budget.room_for(units, cost) is not None:
                        budget.refusals += 1
                _occupy(candidate, keyed)
                admission.decisions.append(Decision(candidate, budget_exceeded=exceeded))
                continue
        wait = _rate_wait(keyed, units if flow.reserves else 0)
        if wait is not None:
            admission.held_back["rate"] += 1
            admission.wait_for(wait)
            continue
        _occupy(candidate, keyed)
        for key_limit in keyed:
            if key_limit.requests_per_second is not None:
                key_limit.request_tokens -= 1
            if key_limit.units_per_minute is not None:
                key_limit.unit_tokens -= units
        reserved = []
        if flow.reserves:
            for budget in applicable:
                budget.reserved_units += units
                budget.reserved_cost += cost
            reserved = [budget.ref for budget in applicable]
        admission.decisions.append(Decision(candidate, reserved=reserved))
    return admission


def _occupy(candidate: Candidate, keyed: list[KeyLimit]) -> None:
    """Count a granted candidate in flight under each of its keys."""
    for key_limit in keyed:
        if candidate.is_run:
            key_limit.runs_in_flight += 1
        else:
            key_limit.steps_in_flight += 1


def _within_concurrency(candidate: Candidate, keyed: list[KeyLimit]) -> bool:
    for key_limit in keyed:
        if candidate.is_run:
            cap, held = key_limit.max_runs, key_limit.runs_in_flight
        else:
            cap, held = key_limit.max_steps, key_limit.steps_in_flight
        if cap is not None and held >= cap:
            return False
    return True


def _rate_wait(keyed: list[KeyLimit], units: int) -> float | None:
    """Seconds until every rate of these keys lets one more grant of `units` through (None:
    they let it through now). An estimate larger than a key's burst waits for a full burst
    and overdraws it: the next grants wait until it is paid back."""
    wait = 0.0
    for key_limit in keyed:
        rps = key_limit.requests_per_second
        if rps is not None and key_limit.request_tokens < 1:
            wait = max(wait, (1 - key_limit.request_tokens) / rps)
        upm = key_limit.units_per_minute
        needed = min(units, key_limit.unit_burst)
        if upm is not None and units > 0 and key_limit.unit_tokens < needed:
            wait = max(wait, (needed - key_limit.unit_tokens) / (upm / 60))
    return wait or None
