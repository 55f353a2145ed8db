"""Faults under load, then the checker over the client's log and the database. The quick
profile (a short random schedule) runs in `make test`; `make chaos` runs each fault as its own
scenario and a longer random schedule. Each prints its numbers."""

from __future__ import annotations

import pytest

from tests.chaos.harness import ChaosCluster
from tests.chaos.scenarios import (
    PROVOKES_STALE_WRITES,
    SCENARIOS,
    Outcome,
    random_schedule,
    run_scenario,
)

# Generous bounds: a scenario waits up to 3 minutes for its runs to end, more on a slow machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SCENARIO_SECONDS = 12.0


def assert_clean(outcome: Outcome) -> None:
    """Nothing lost, nothing doubled, nothing stuck; and the faults did happen."""
    print(outcome.summary())
    assert outcome.violations() == []
    assert outcome.report.workflows > 0 and outcome.faults.injected
    assert outcome.report.completed > 0


def test_quick_random_schedule(chaos_cluster: ChaosCluster, chaos_seed: int) -> None:
    outcome = run_scenario(
        chaos_cluster, "quick", random_schedule(slice_seconds=4.0), chaos_seed, duration=30.0
    )
    assert_clean(outcome)
    assert outcome.stale_refused > 0


@pytest.mark.chaos
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(chaos_cluster: ChaosCluster, chaos_seed: int, name: str) -> None:
    outcome = run_scenario(chaos_cluster, name, SCENARIOS[name], chaos_seed, SCENARIO_SECONDS)
    assert_clean(outcome)
    if name in PROVOKES_STALE_WRITES:
        assert outcome.stale_refused > 0


@pytest.mark.chaos
def test_full_random_schedule(chaos_cluster: ChaosCluster, chaos_seed: int) -> None:
    outcome = run_scenario(
        chaos_cluster, "random", random_schedule(slice_seconds=5.0), chaos_seed, duration=90.0
    )
    assert_clean(outcome)
    assert outcome.stale_refused > 0
