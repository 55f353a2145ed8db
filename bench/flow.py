"""Flow control's targets: a small tenant served promptly beside a large one (fairness), a key
limited to 50 requests a second measured at that rate, and a budget under a 100-way fan-out
never overspent while a worker is killed."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

import psycopg

from bench.cluster import Cluster
from bench.shapes import TIMEOUT, Progress
from bench.stats import summary_ms
from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.telemetry.rpc import sync_channel

FAIRNESS_RATIO_TARGET = 2.0
RATE_TARGET = 50.0  # requests per second
RATE_TOLERANCE = 0.05
HOLD = 0.02  # each tenant run holds its worker slot this long
SMALL_GAP = 0.1  # between the small tenant's starts
WARM_UP_RUNS = 5
BUDGET_UNITS = 500
FAN_OUT = 100


def flow(cluster: Cluster, client: Client, big: int, small: int, ticks: int) -> dict[str, Any]:
    """The three flow-control figures, on this cluster (two workers connected)."""
    with sync_channel(cluster.gateway, api_key=cluster.client_key) as channel:
        api = admingrpc.AdminServiceStub(channel)
        return {
            "fairness": fairness(cluster, client, big, small),
            "rate": rate(client, api, ticks),
            "budget": budget(cluster, client, api),
        }


def _small_tenant(
    cluster: Cluster, client: Client, small: int, prefix: str
) -> tuple[list[float], list[float]]:
    """Start the small tenant's runs one by one, spaced; per run, seconds from its creation
    to its first grant, and from its task's arrival in the scheduler to that grant, on the
    database clock (the grant seen by a sampler)."""
    ids = [f"{prefix}-{index}" for index in range(small)]
    with Grants(cluster.dsn, ids) as grants:
        for workflow_id in ids:
            client.start_workflow(
                "fair_run", HOLD, workflow_id=workflow_id, fairness_key="tenant:small"
            )
            time.sleep(SMALL_GAP)
        for workflow_id in ids:
            client.wait(workflow_id, timeout=TIMEOUT)
    waits, in_scheduler = [], []
    for workflow_id in ids:
        created = client.describe(workflow_id).workflow.create_time.ToNanoseconds() / 1e9
        waits.append(grants.seen[workflow_id] - created)
        in_scheduler.append(grants.seen[workflow_id] - grants.enqueued[workflow_id])
    return waits, in_scheduler


def fairness(cluster: Cluster, client: Client, big: int, small: int) -> dict[str, Any]:
    """The small tenant's schedule-to-start, idle and beside the large tenant's backlog."""
    progress = Progress("fairness, idle")
    _small_tenant(cluster, client, WARM_UP_RUNS, "tenant-warm-up")  # a type's first runs start cold
    idle_waits, idle_in_scheduler = _small_tenant(cluster, client, small, "tenant-small-idle")
    idle = summary_ms(idle_waits)
    progress.done(f"{idle['p99_ms']:.1f} ms p99")
    progress = Progress(f"fairness, beside {big} queued runs")
    workers = len(cluster.workers)
    cluster.stop_workers()  # the large tenant's runs queue up first

    def start_big(index: int) -> None:
        client.start_workflow(
            "fair_run", HOLD, workflow_id=f"tenant-big-{index}", fairness_key="tenant:big"
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(start_big, range(big)))
    cluster.start_workers(workers, 10)
    began = time.monotonic()
    busy_waits, busy_in_scheduler = _small_tenant(cluster, client, small, "tenant-small-busy")
    backlog = _backlog(cluster.dsn)
    busy = summary_ms(busy_waits)
    for index in range(big):
        client.wait(f"tenant-big-{index}", timeout=TIMEOUT)
    # In first-in-first-out order, the small tenant's first run would have waited for every
    # run queued before it: as long as the large tenant's runs took.
    fifo_wait = time.monotonic() - began
    ratio = busy["p99_ms"] / idle["p99_ms"]
    scheduler_part = summary_ms(busy_in_scheduler)["p99_ms"]
    progress.done(
        f"{busy['p99_ms']:.1f} ms p99, {ratio:.2f}x idle ({backlog} still queued; arrival in "
        f"the scheduler → grant {scheduler_part:.1f} ms p99)"
    )
    return {
        "idle": idle,
        "busy": busy,
        # Of that, from the task's arrival in the scheduler to its grant.
        "idle_in_scheduler": summary_ms(idle_in_scheduler),
        "busy_in_scheduler": summary_ms(busy_in_scheduler),
        "big_runs": big,
        "small_runs": small,
        "queued_after_small": backlog,
        "fifo_wait_s": round(fifo_wait, 2),
        "ratio": round(ratio, 2),
        "target_ratio": FAIRNESS_RATIO_TARGET,
    }


def _backlog(dsn: str) -> int:
    """Tasks due and not leased now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM scheduler.tasks WHERE lease_owner IS NULL AND run_at <= now()"
        ).fetchone()
    return int(row[0]) if row else 0


def rate(client: Client, api: admingrpc.AdminServiceStub, ticks: int) -> dict[str, Any]:
    """Grants of a key limited to 50 a second, measured from the steps' attempt starts (the
    database clock), past the first second's burst."""
    progress = Progress(f"rate limit, {ticks} steps at {RATE_TARGET:g}/s")
    limit = admin.FlowLimit(key="provider:bench", requests_per_second=RATE_TARGET)
    api.SetFlowLimit(admin.SetFlowLimitRequest(limit=limit), timeout=TIMEOUT)
    spec = {"step": "tick", "count": ticks, "keys": ["provider:bench"]}
    client.start_workflow("keyed_fan_out", spec, workflow_id="rated")
    client.result("rated", timeout=TIMEOUT)
    starts = sorted(
        event.event_time.ToNanoseconds() / 1e9
        for event in client.history("rated")
        if event.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_STARTED
    )
    steady = [moment for moment in starts if moment >= starts[0] + 1.0]
    measured = (len(steady) - 1) / (steady[-1] - steady[0])
    progress.done(f"{measured:.1f}/s")
    return {
        "steps": len(starts),
        "per_s": round(measured, 2),
        "target_per_s": RATE_TARGET,
        "tolerance": RATE_TOLERANCE,
    }


def budget(cluster: Cluster, client: Client, api: admingrpc.AdminServiceStub) -> dict[str, Any]:
    """A key's budget of 500 units under a 100-way fan-out of steps estimating 10 and using 9,
    one worker killed mid-way: the most ever held beyond the budget, sampled throughout."""
    progress = Progress(f"budget under a {FAN_OUT}-way fan-out, a worker killed")
    limit = fpb.Budget(units=BUDGET_UNITS)
    api.SetBudget(
        admin.SetBudgetRequest(budget=admin.BudgetInfo(key="team:bench", limit=limit)),
        timeout=TIMEOUT,
    )
    overshoot = Overshoot(cluster.dsn)
    with overshoot:
        spec = {
            "step": "spend",
            "count": FAN_OUT,
            "keys": ["team:bench"],
            "estimate": 10,
            "input": 9,
        }
        client.start_workflow(
            "keyed_fan_out", spec, workflow_id="budgeted", on_budget_exceeded="fail"
        )
        time.sleep(0.5)
        cluster.workers[0].kill()  # mid-step: its attempts settle at their estimates
        cluster.workers[0].wait()
        client.result("budgeted", timeout=TIMEOUT)
    [used] = api.ListBudgets(admin.ListBudgetsRequest(), timeout=TIMEOUT).budgets
    progress.done(f"overshoot {overshoot.most} units ({used.spent.units} of {BUDGET_UNITS} spent)")
    return {
        "limit_units": BUDGET_UNITS,
        "spent_units": used.spent.units,
        "reserved_units": used.reserved.units,
        "overshoot_units": overshoot.most,
        "samples": overshoot.samples,
    }


class Sampler:
    """Samples the database every `interval` seconds in a thread of its own, while in its
    `with` block (sample() says what one sample does)."""

    interval = 0.01

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                self.sample(conn)
                self._stop.wait(self.interval)

    def sample(self, conn: psycopg.Connection) -> None:
        raise NotImplementedError


class Overshoot(Sampler):
    """How far a budget's reserved and spent units ever went above its limit."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.most = 0
        self.samples = 0

    def sample(self, conn: psycopg.Connection) -> None:
        row = conn.execute(
            "SELECT COALESCE(max(reserved_units + spent_units - limit_units), 0)"
            " FROM scheduler.budgets WHERE limit_units IS NOT NULL"
        ).fetchone()
        self.most = max(self.most, int(row[0]) if row else 0)
        self.samples += 1


class Grants(Sampler):
    """When the runs `workflow_ids` are first granted (their task's fence rises above 0), by
    the database clock, sampled every 2 ms: each sample looks their rows up by key, as fast
    on a busy table as on an idle one."""

    interval = 0.002

    def __init__(self, dsn: str, workflow_ids: list[str]) -> None:
        super().__init__(dsn)
        self._ids = workflow_ids
        self.seen: dict[str, float] = {}  # first seen granted
        self.enqueued: dict[str, float] = {}  # made due in the scheduler

    def sample(self, conn: psycopg.Connection) -> None:
        waiting = [i for i in self._ids if i not in self.seen]
        rows = conn.execute(
            "SELECT workflow_id, EXTRACT(EPOCH FROM clock_timestamp())::float8,"
            " EXTRACT(EPOCH FROM created_at)::float8 FROM scheduler.tasks"
            " WHERE workflow_id = ANY(%s) AND step_id = '' AND fence > 0",
            [waiting],
        ).fetchall()
        for workflow_id, now, enqueued in rows:
            self.seen.setdefault(workflow_id, now)
            self.enqueued.setdefault(workflow_id, enqueued)
