"""Shared fixtures: PostgreSQL and a cluster of real service processes. `--chaos` adds the full
fault-injection scenarios (`make chaos`) to the quick profile `make test` runs."""

from __future__ import annotations

import os

import pytest

# Set before anything imports grpc. The suite forks (to exec services and workers) while its
# own threads make gRPC calls; gRPC's fork handlers are for forks that do not exec, and
# running them then can crash the child before its exec.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

pytest_plugins = (
    "tests.fixtures.postgres",
    "tests.fixtures.cluster",
    "tests.fixtures.otlp",
    "tests.fixtures.model_endpoint",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos", action="store_true", help="run every chaos scenario (slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --chaos, the full scenarios are left out (the quick profile stays)."""
    if config.getoption("--chaos"):
        return
    full = [item for item in items if item.get_closest_marker("chaos")]
    if full:
        config.hook.pytest_deselected(items=full)
        items[:] = [item for item in items if not item.get_closest_marker("chaos")]
