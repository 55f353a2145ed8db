"""A failover of the database under load: the primary's postmaster killed (-9), the synchronous
standby promoted, the services given both in one multi-host URL. Nothing acknowledged is lost
(every acknowledged start, signal and step is in the promoted database), nothing is stuck,
no service process dies of it; the reconnection time is printed. The short version is part of
`make test`, the longer one of `make chaos`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.failover import FailoverCluster, primary_failover
from tests.chaos.harness import started
from tests.chaos.scenarios import assert_clean, run_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture
def failover_cluster(chaos_seed: int) -> Iterator[FailoverCluster]:
    """The chaos cluster on a fresh primary and synchronous standby (for one test: it ends
    with the primary dead)."""
    # A short prefix: the servers' sockets live in the directory.
    with started(lambda workdir: FailoverCluster(workdir, seed=chaos_seed), "pdfo") as cluster:
        yield cluster


def test_failover_under_load(failover_cluster: FailoverCluster, chaos_seed: int) -> None:
    outcome = run_scenario(failover_cluster, "failover", primary_failover, chaos_seed, 8.0)
    assert_clean(outcome)
    assert len(failover_cluster.failovers) == 1


@pytest.mark.chaos
def test_failover_under_longer_load(failover_cluster: FailoverCluster, chaos_seed: int) -> None:
    outcome = run_scenario(failover_cluster, "failover-long", primary_failover, chaos_seed, 40.0)
    assert_clean(outcome)
    assert len(failover_cluster.failovers) == 1
