"""One cluster (the real services and a worker) for the whole fuzzing module, on a database of
its own; PERDURE_FUZZ_EXAMPLES sets how many requests each test generates."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

from tests.fixtures.cluster import Cluster
from tests.fixtures.postgres import Databases

SEEDED_RUNS = ("fuzz", "fuzz-1", "default", "go")

settings.register_profile(
    "perdure",
    max_examples=int(os.environ.get("PERDURE_FUZZ_EXAMPLES", "25")),
    deadline=None,  # real processes answer; their speed is not what is tested here
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,  # a failure prints how to reproduce it
)
settings.load_profile("perdure")


@contextmanager
def cluster_of_its_own(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory, **env: str
) -> Iterator[Cluster]:
    """Gateway, history and scheduler on a database of their own, dropped afterwards."""
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, tmp_path_factory.mktemp("fuzz"), env_overrides=env)
        try:
            cluster.start_services()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def fuzz_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A worker serving the e2e waiting workflows on `default`, and runs of `two_signals`
    (waiting for signal "go") under ids the strategies use."""
    with cluster_of_its_own(databases, tmp_path_factory) as cluster:
        cluster.start_worker("fuzz-worker", module="tests.e2e.waiting_workflows")
        with cluster.client() as client:
            for workflow_id in SEEDED_RUNS:
                client.start_workflow("two_signals", workflow_id=workflow_id)
        yield cluster


@pytest.fixture(scope="module")
def secured_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A cluster requiring API keys (and holding none)."""
    with cluster_of_its_own(databases, tmp_path_factory, PERDURE_AUTH="on") as cluster:
        yield cluster
