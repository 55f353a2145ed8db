"""Shared fixtures: PostgreSQL and a cluster of real service processes."""

pytest_plugins = ("tests.fixtures.postgres", "tests.fixtures.cluster", "tests.fixtures.otlp")
