"""The chaos suite's cluster (one per module) and its seed."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest

from tests.chaos.harness import ChaosCluster, started


@pytest.fixture(scope="session")
def chaos_seed() -> int:
    """PERDURE_CHAOS_SEED, or a fresh one; printed so a failure can be replayed."""
    seed = int(os.environ.get("PERDURE_CHAOS_SEED") or random.randrange(1, 10**6))
    print(f"\nchaos seed {seed} (replay: PERDURE_CHAOS_SEED={seed} make chaos)")
    return seed


@pytest.fixture(scope="module")
def chaos_cluster(chaos_seed: int) -> Iterator[ChaosCluster]:
    """The whole cluster behind the proxy, started once for the module's scenarios."""
    with started(
        lambda workdir: ChaosCluster(workdir, seed=chaos_seed), "perdure-chaos-"
    ) as cluster:
        yield cluster
