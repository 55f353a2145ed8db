"""Faults under load, then the checker over the client's log and the database. The quick
profile (a short random schedule) and the scale-out run (no faults, many runs) are part of
`make test`; `make chaos` runs each fault as its own scenario and a longer random schedule.
Each prints its numbers."""

from __future__ import annotations

import random

import pytest

from tests.chaos.harness import SCHEDULERS, WORKERS, ChaosCluster
from tests.chaos.scenarios import (
    PROVOKES_STALE_WRITES,
    QUIESCE_TIMEOUT,
    SCENARIOS,
    FaultLog,
    assert_clean,
    lease_stories,
    observe,
    random_schedule,
    run_scenario,
)
from tests.chaos.streams import killed_mid_stream, stale_worker_resumed
from tests.chaos.workload import Mix, Workload

# Generous bounds: a scenario waits up to 3 minutes for its runs to end, more on a slow machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SCENARIO_SECONDS = 12.0
SCALE_OUT_RUNS = 1000
# Every run sleeps on a durable timer and takes a signal; nothing is doubled or cancelled.
SCALE_OUT = Mix(
    steps=(1, 2),
    sleeps=(0.5, 1.0, 2.0),
    signals=(1,),
    work_seconds=(0.0,),
    flaky=0.0,
    duplicate_start=0.0,
    duplicate_signal=0.0,
    cancel=0.0,
    stray=0.0,
    pause=(0.0, 0.0),
)


def test_quick_random_schedule(chaos_cluster: ChaosCluster, chaos_seed: int) -> None:
    outcome = run_scenario(
        chaos_cluster, "quick", random_schedule(slice_seconds=4.0), chaos_seed, duration=30.0
    )
    assert_clean(outcome)
    assert outcome.stale_refused > 0


@pytest.mark.chaos  # a scale test of about a minute: make chaos
def test_scale_out_on_one_database(chaos_cluster: ChaosCluster, chaos_seed: int) -> None:
    """Two replicas each of gateway, history and scheduler on one database (started at once,
    so their migrations raced), worker sessions moving between the schedulers every few
    seconds, 1,000 runs with a timer and a signal each: every run completes, every step body
    runs once, every timer fires and never early, no lease is left to expire."""
    workload = Workload(
        chaos_cluster.gateways,
        prefix=f"scale-out-{chaos_seed}",
        seed=chaos_seed,
        drivers=8,
        mix=SCALE_OUT,
        runs=SCALE_OUT_RUNS,
    )
    moves_before = chaos_cluster.logs("worker").count("moving to another scheduler replica")
    outcome = observe(
        chaos_cluster,
        "scale-out",
        chaos_seed,
        workload,
        FaultLog(),
        lambda: workload.join(QUIESCE_TIMEOUT),
    )
    print(outcome.summary())
    if outcome.leases_expired or outcome.stale_refused:  # shown with whichever check fails
        print(lease_stories(chaos_cluster, workload.prefix))
    report = outcome.report
    assert outcome.violations() == []
    assert report.workflows == report.completed == report.timers == SCALE_OUT_RUNS
    assert report.signals_acknowledged == SCALE_OUT_RUNS
    assert report.steps_executed == report.effects  # no step body ran twice
    assert outcome.leases_expired == outcome.stale_refused == 0
    assert chaos_cluster.logs("worker").count("moving to another scheduler replica") > moves_before
    for scheduler in SCHEDULERS:  # both granted work to sessions of every worker at some point
        output = chaos_cluster.members[scheduler].output()
        assert all(f"worker {worker} connected" in output for worker in WORKERS)


def test_streams_through_a_killed_and_a_stale_worker(
    chaos_cluster: ChaosCluster, chaos_seed: int
) -> None:
    """300 chunks, 10 ms apart, 3 readers cutting their calls at random: a worker killed
    mid-stream, then one stopped past its lease and continued (tests/chaos/streams.py)."""
    rng = random.Random(chaos_seed)
    problems = killed_mid_stream(chaos_cluster, rng, chunks=300, pause=0.01, readers=3)
    problems += stale_worker_resumed(chaos_cluster, rng, chunks=300, pause=0.01, readers=3)
    assert problems == []


@pytest.mark.chaos
def test_streams_under_many_readers(chaos_cluster: ChaosCluster, chaos_seed: int) -> None:
    """The same, longer: 1,000 chunks and 8 readers per run."""
    rng = random.Random(chaos_seed + 1)
    problems = killed_mid_stream(chaos_cluster, rng, chunks=1000, pause=0.005, readers=8)
    problems += stale_worker_resumed(chaos_cluster, rng, chunks=1000, pause=0.005, readers=8)
    assert problems == []


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
