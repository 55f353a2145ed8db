"""The chaos suite's cluster (one per module) and its seed."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosCluster


@pytest.fixture(scope="session")
def chaos_seed() -> int:
    """PERDURE_CHAOS_SEED, or a fresh one; printed so a failure can be replayed."""
    seed = int(os.environ.get("PERDURE_CHAOS_SEED") or random.randrange(1, 10**6))
    print(f"\nchaos seed {seed} (replay: PERDURE_CHAOS_SEED={seed} make chaos)")
    return seed


@pytest.fixture(scope="module")
def chaos_cluster(chaos_seed: int) -> Iterator[ChaosCluster]:
    """The whole cluster behind the proxy, started once for the module's scenarios. Its
    directory is its own, not under pytest's base temp, which another pytest session on the
    machine may delete (pytest keeps only the last three) while the database runs in it.
    PERDURE_KEEP_CHAOS_DIR=1 keeps it afterwards: every process's log and the database's."""
    workdir = Path(tempfile.mkdtemp(prefix="perdure-chaos-"))
    cluster = ChaosCluster(workdir, seed=chaos_seed)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        if not os.environ.get("PERDURE_KEEP_CHAOS_DIR"):
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"chaos cluster directory kept: {workdir}")
