"""The scheduler's instruments (no-ops unless metrics are exported)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from perdure.scheduler.store import TaskStore
from perdure.telemetry.propagation import untraced
from perdure.telemetry.setup import DURATION_BUCKETS
from perdure.telemetry.timers import timer_lateness

log = logging.getLogger(__name__)
_meter = metrics.get_meter("perdure.scheduler")

SCHEDULE_TO_START = _meter.create_histogram(
    "perdure.task.schedule_to_start",
    unit="s",
    description="Time from a task being due to its grant to a worker, by task queue.",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)
TIMER_LATENESS = timer_lateness(_meter)
LEASE_EXPIRIES = _meter.create_counter(
    "perdure.lease.expirations",
    unit="{lease}",
    description="Leases that ran out without renewal and were granted to another worker.",
)
STICKY_GRANTS = _meter.create_counter(
    "perdure.task.sticky_grants",
    unit="{task}",
    description="Grants of tasks whose run a worker kept (sticky execution), by task queue and "
    "outcome: kept (granted to that worker) or timed_out (to another, after the sticky "
    "timeout).",
)
HELD_BACK = _meter.create_counter(
    "perdure.flow.held_back",
    unit="{task}",
    description="Due tasks a flow claim passed over, by task queue and what held them: "
    "concurrency (a key's limit), rate (a key's requests or units per time) or budget.",
)
BUDGET_EXCEEDED = _meter.create_counter(
    "perdure.budget.exceeded",
    unit="{step}",
    description="Steps failed with BudgetExceeded (their run chose to fail), by task queue.",
)
USAGE_UNITS = _meter.create_counter(
    "perdure.usage.units",
    unit="{unit}",
    description="Units steps reported using (TaskDone.usage), by task queue.",
)
USAGE_COST = _meter.create_counter(
    "perdure.usage.cost",
    unit="{micro}",
    description="Money steps reported spending, in millionths, by task queue.",
)
WORKER_STREAMS = _meter.create_up_down_counter(
    "perdure.worker.streams",
    unit="{stream}",
    description="Worker streams connected to this scheduler replica, by task queue.",
)
BACKLOG_QUERY_TIMEOUT = 5.0


def observe_backlog(store: TaskStore, loop: asyncio.AbstractEventLoop) -> None:
    """Report each queue's due, unleased tasks whenever metrics are collected."""

    async def read() -> list[Observation]:
        counts = await store.backlog()
        return [Observation(n, {"perdure.task_queue": q}) for q, n in counts.items()]

    _observe_gauge(
        loop,
        read,
        "perdure.task_queue.backlog",
        unit="{task}",
        description="Tasks due and not leased, by task queue.",
        what="task queue backlog",
    )


def observe_pauses(store: TaskStore, loop: asyncio.AbstractEventLoop) -> None:
    """Report the pauses in force (pauses.py), by namespace and scope."""

    async def read() -> list[Observation]:
        counts = await store.pause_counts()
        return [
            Observation(n, {"perdure.namespace": namespace, "perdure.pause.scope": scope})
            for (namespace, scope), n in counts.items()
        ]

    _observe_gauge(
        loop,
        read,
        "perdure.pauses",
        unit="{pause}",
        description="Pauses in force: workflow ids, workflow types and task queues granted "
        "to no worker, by namespace and scope.",
        what="pauses",
    )


def _observe_gauge(
    loop: asyncio.AbstractEventLoop,
    read: Callable[[], Awaitable[list[Observation]]],
    name: str,
    unit: str,
    description: str,
    what: str,
) -> None:
    """A gauge read from the database whenever metrics are collected (the callback runs on the
    exporter's thread; the query runs on the service's event loop)."""

    async def untraced_read() -> list[Observation]:
        with untraced():
            return await read()

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        if not loop.is_running():  # the final collection, after the service stopped
            return []
        future = asyncio.run_coroutine_threadsafe(untraced_read(), loop)
        try:
            return future.result(timeout=BACKLOG_QUERY_TIMEOUT)
        except Exception as error:  # a collection must never take the exporter down
            future.cancel()
            log.warning("%s not measured: %s", what, error)
            return []

    _meter.create_observable_gauge(name, callbacks=[observe], unit=unit, description=description)
