"""The history service's instruments (no-ops unless metrics are exported)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics

from perdure.telemetry.setup import DURATION_BUCKETS

_meter = metrics.get_meter("perdure.history")

WORKFLOWS_STARTED = _meter.create_counter(
    "perdure.workflow.started", unit="{workflow}", description="Runs created, by workflow type."
)
WORKFLOWS_CLOSED = _meter.create_counter(
    "perdure.workflow.closed",
    unit="{workflow}",
    description="Runs closed, by workflow type and outcome "
    "(completed, failed, parked, cancelled, terminated).",
)
FENCE_REJECTIONS = _meter.create_counter(
    "perdure.fence.rejections",
    unit="{write}",
    description="Journal writes refused because a newer lease (a higher fence) owns the run.",
)
_WRITE_DURATION = _meter.create_histogram(
    "perdure.journal.write.duration",
    unit="s",
    description="Time to commit one journal write, by operation.",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)


@contextmanager
def timed_write(operation: str) -> Iterator[None]:
    """Record how long the enclosed journal write took."""
    started = time.perf_counter()
    try:
        yield
    finally:
        duration = time.perf_counter() - started
        _WRITE_DURATION.record(duration, {"perdure.journal.operation": operation})


STUCK_RUNS = _meter.create_counter(
    "perdure.workflow.stuck",
    unit="{workflow}",
    description="Runs found open with no lease, no task and no wake-up, and made due again, "
    "by workflow type.",
)


def count_started(workflow_type: str) -> None:
    """Count a run started (once committed: started = closed + open)."""
    WORKFLOWS_STARTED.add(1, {"perdure.workflow.type": workflow_type})


def count_closed(workflow_type: str, status: str) -> None:
    """Count a run closed with `status`."""
    attributes = {
        "perdure.workflow.type": workflow_type,
        "perdure.workflow.outcome": status.lower(),
    }
    WORKFLOWS_CLOSED.add(1, attributes)


MODEL_TOKENS = _meter.create_counter(
    "perdure.model.tokens",
    unit="{token}",
    description="Tokens model calls reported using, journaled with their steps, by model.",
)
MODEL_COST = _meter.create_counter(
    "perdure.model.cost",
    unit="{micro}",
    description="What model calls reported spending, in millionths of the prices' currency, "
    "journaled with their steps, by model.",
)


def count_model_usage(usage: dict[str, Any] | None) -> None:
    """Count a journaled report of a model call (one that names its model), once committed."""
    if usage is None or "model" not in usage:
        return
    attributes = {"perdure.model": usage["model"]}
    MODEL_TOKENS.add(usage["units"], attributes)
    MODEL_COST.add(usage["cost_micros"], attributes)


# The journal as the workers' records add to it: a counter add after each commit, nothing more
# on the append path. Bytes as a run's history_bytes counts them (store.event_size).
JOURNAL_EVENTS_WRITTEN = _meter.create_counter(
    "perdure.journal.events_written",
    unit="{event}",
    description="Events the workers' records appended to journals.",
)
JOURNAL_BYTES_WRITTEN = _meter.create_counter(
    "perdure.journal.bytes_written",
    unit="By",
    description="Journal bytes the workers' records appended (payloads, failures, 64 per event).",
)


def count_journaled(size: int) -> None:
    """Count one committed record of `size` journal bytes."""
    JOURNAL_EVENTS_WRITTEN.add(1)
    JOURNAL_BYTES_WRITTEN.add(size)


class StorageFigures:
    """The last storage sample this replica took (storage.StorageSampler), which the storage
    gauges report; empty while another replica samples, so each figure comes from one."""

    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, int]] = {}
        self.database_bytes: int | None = None

    def by_namespace(self, figure: str) -> Iterator[metrics.Observation]:
        for namespace, row in self.namespaces.items():
            yield metrics.Observation(row[figure], {"perdure.namespace": namespace})


STORAGE = StorageFigures()
_meter.create_observable_gauge(
    "perdure.storage.bytes",
    callbacks=[lambda _options: STORAGE.by_namespace("history_bytes")],
    unit="By",
    description="Journal bytes of a namespace's runs (the sum of their history_bytes).",
)
_meter.create_observable_gauge(
    "perdure.storage.rows",
    callbacks=[lambda _options: STORAGE.by_namespace("runs")],
    unit="{run}",
    description="A namespace's runs, open and closed.",
)
_meter.create_observable_gauge(
    "perdure.storage.events",
    callbacks=[lambda _options: STORAGE.by_namespace("events")],
    unit="{event}",
    description="Events in a namespace's journals.",
)
_meter.create_observable_gauge(
    "perdure.database.size",
    callbacks=[
        lambda _options: (
            [] if STORAGE.database_bytes is None else [metrics.Observation(STORAGE.database_bytes)]
        )
    ],
    unit="By",
    description="The database's size on disk (pg_database_size).",
)
PARTITIONS_DROPPED = _meter.create_counter(
    "perdure.retention.partitions_dropped",
    unit="{partition}",
    description="Journal partitions dropped by retention, their runs all past retention.",
)
RUNS_DELETED = _meter.create_counter(
    "perdure.retention.runs_deleted",
    unit="{workflow}",
    description="Runs deleted by retention, by path: with their partition (partition) or "
    "one by one from a partition kept for others (rows).",
)


def count_partition_dropped() -> None:
    """Count a journal partition dropped."""
    PARTITIONS_DROPPED.add(1)


def count_runs_deleted(runs: int, path: str) -> None:
    """Count runs deleted by retention, `path` "partition" or "rows"."""
    if runs:
        RUNS_DELETED.add(runs, {"perdure.retention.path": path})
