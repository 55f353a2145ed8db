"""Perdure's shapes: each starts workflows on a running cluster and reads the outcome from the
journal (database clock), so that polling by the benchmark never inflates a figure."""

from __future__ import annotations

import signal
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import requests

from bench.cluster import Cluster
from bench.stats import rates, summary_ms
from perdure.client import Client, from_payload

TIMEOUT = 300.0
STARTERS = 16  # threads starting workflows "at once"


class Progress:
    """One line per phase, rewritten in place on a terminal."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self._tty = sys.stdout.isatty()
        self._last = 0.0

    def update(self, done: int, total: int) -> None:
        """Show how far the phase is (at most every 0.2 s, and at the end)."""
        now = time.monotonic()
        if done < total and now - self._last < (0.2 if self._tty else 5.0):  # a log: fewer lines
            return
        self._last = now
        line = f"  {self.phase}: {done}/{total}"
        print(f"\r{line}" if self._tty else line, end="" if self._tty else "\n", flush=True)

    def done(self, summary: str) -> None:
        """End the phase with its headline figure."""
        print(f"\r  {self.phase}: {summary}" + " " * 20, flush=True)


def _query(dsn: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _wait_closed(dsn: str | list[str], prefix: str, total: int, progress: Progress) -> None:
    """Wait until `total` runs of `prefix` have closed (in the database, or the cells'
    databases, `dsn` names). One connection each, polled five times a second: the figures come
    from the database's timestamps, and a poll that connected anew every 50 ms cost PostgreSQL
    a backend's start each time, counted as the cluster's CPU."""
    deadline = time.monotonic() + TIMEOUT
    with ExitStack() as stack:
        conns = [
            stack.enter_context(psycopg.connect(one, autocommit=True))
            for one in ([dsn] if isinstance(dsn, str) else dsn)
        ]
        while True:
            closed = sum(
                conn.execute(
                    "SELECT count(*) FROM history.workflows WHERE workflow_id LIKE %s"
                    " AND status NOT IN ('RUNNING', 'WAITING')",
                    [f"{prefix}%"],
                ).fetchall()[0][0]
                for conn in conns
            )
            progress.update(closed, total)
            if closed >= total:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{prefix}: only {closed}/{total} workflows closed")
            time.sleep(0.2)


def _start_all(client: Client, workflow_type: str, inputs: dict[str, Any]) -> None:
    """Start one workflow per id, from several threads at once."""
    with ThreadPoolExecutor(STARTERS) as pool:
        list(
            pool.map(
                lambda item: client.start_workflow(workflow_type, item[1], workflow_id=item[0]),
                inputs.items(),
            )
        )


def latency(cluster: Cluster, client: Client, runs: int, commit_ms: float) -> dict[str, Any]:
    """One workflow at a time: 10 no-op steps, and 0 steps for the start/complete cost."""
    progress = Progress("latency")
    durations: dict[int, list[float]] = {0: [], 10: []}
    for index in range(runs * 2):
        steps = 10 if index % 2 else 0
        workflow_id = f"lat{steps}-{index}"
        client.start_workflow("noop_steps", steps, workflow_id=workflow_id)
        run = client.wait(workflow_id, timeout=TIMEOUT).workflow
        durations[steps].append(
            (run.close_time.ToNanoseconds() - run.create_time.ToNanoseconds()) / 1e9
        )
        progress.update(index + 1, runs * 2)
    ten, empty = summary_ms(durations[10]), summary_ms(durations[0])
    per_step = (ten["median_ms"] - empty["median_ms"]) / 10
    progress.done(f"10 steps {ten['median_ms']:.1f} ms median, {per_step:.2f} ms per step")
    return {
        "runs": runs,
        "ten_steps": ten,
        "start_complete": empty,
        "per_step_ms": round(per_step, 3),
        "per_step_vs_commit": round(per_step / commit_ms, 2) if commit_ms else None,
    }


def api_calls(cluster: Cluster, client: Client, calls: int) -> dict[str, Any]:
    """One call at a time, describing a finished 10-step run over gRPC and over HTTP/JSON:
    what the HTTP layer (a JSON route calling the gateway's own gRPC port) adds."""
    client.start_workflow("noop_steps", 10, workflow_id="api-1")
    client.wait("api-1", timeout=TIMEOUT)
    over_grpc = _timed(calls, lambda: client.describe("api-1"))
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {cluster.client_key}"
        url = f"http://{cluster.http}/v1/workflows/api-1"
        session.get(url, timeout=TIMEOUT).raise_for_status()  # connect first
        over_http = _timed(calls, lambda: session.get(url, timeout=TIMEOUT).raise_for_status())
    grpc_ms, http_ms = summary_ms(over_grpc), summary_ms(over_http)
    ratio = http_ms["median_ms"] / grpc_ms["median_ms"]
    Progress("describe over gRPC and HTTP").done(
        f"{grpc_ms['median_ms']:.2f} / {http_ms['median_ms']:.2f} ms median ({ratio:.2f}x)"
    )
    return {"calls": calls, "grpc": grpc_ms, "http": http_ms, "http_vs_grpc": round(ratio, 2)}


def _timed(calls: int, call: Callable[[], object]) -> list[float]:
    """How long each of `calls` calls took, in seconds."""
    durations = []
    for _ in range(calls):
        before = time.perf_counter()
        call()
        durations.append(time.perf_counter() - before)
    return durations


def remote_latency(client: Client, runs: int, local_per_step_ms: float) -> dict[str, Any]:
    """One workflow at a time: 10 remote steps one after the other (ctx.call), and 10 awaited
    together (ctx.gather); per remote step against a local one."""
    progress = Progress("remote steps")
    durations: dict[str, list[float]] = {"remote_steps": [], "remote_fan_out": []}
    for index in range(runs * 2):
        workflow_type = "remote_fan_out" if index % 2 else "remote_steps"
        workflow_id = f"{workflow_type}-{index}"
        client.start_workflow(workflow_type, 10, workflow_id=workflow_id)
        run = client.wait(workflow_id, timeout=TIMEOUT).workflow
        durations[workflow_type].append(
            (run.close_time.ToNanoseconds() - run.create_time.ToNanoseconds()) / 1e9
        )
        progress.update(index + 1, runs * 2)
    sequential, fan_out = (
        summary_ms(durations["remote_steps"]),
        summary_ms(durations["remote_fan_out"]),
    )
    per_step = sequential["median_ms"] / 10
    progress.done(
        f"{per_step:.1f} ms per remote step, 10 side by side {fan_out['median_ms']:.1f} ms"
    )
    return {
        "runs": runs,
        "ten_remote_steps": sequential,
        "ten_side_by_side": fan_out,
        "per_remote_step_ms": round(per_step, 3),
        "remote_vs_local_step": round(per_step / local_per_step_ms, 1)
        if local_per_step_ms
        else None,
    }


def throughput(
    cluster: Cluster, client: Client, workflows: int, steps: int, tag: str
) -> dict[str, Any]:
    """`workflows` workflows of `steps` no-op steps started at once; workflows/s, steps/s and
    schedule-to-start (creation to the first step's start)."""
    prefix = f"tp-{tag}-"
    progress = Progress(f"throughput {tag}")
    before = cluster.cpu()
    began = time.perf_counter()
    _start_all(client, "noop_steps", {f"{prefix}{i}": steps for i in range(workflows)})
    starting = time.perf_counter() - began  # the runs execute meanwhile
    _wait_closed(cluster.dsns, prefix, workflows, progress)
    spent, stolen = cluster.cpu().since(before)
    rows = [
        row
        for dsn in cluster.dsns  # every cell's runs
        for row in _query(
            dsn,
            """SELECT w.created_at, w.closed_at, (SELECT min(e.started_at) FROM history.events e
                    WHERE e.workflow_id = w.workflow_id AND e.event_type = 'STEP_COMPLETED')
               FROM history.workflows w WHERE w.workflow_id LIKE %s""",
            [f"{prefix}%"],
        )
    ]
    span = (max(r[1] for r in rows) - min(r[0] for r in rows)).total_seconds()
    to_start = [(r[2] - r[0]).total_seconds() for r in rows if r[2] is not None]
    result = {
        **rates(workflows, steps, span),
        "starts_per_s": round(workflows / starting, 1),
        "schedule_to_start": summary_ms(to_start),
        # CPU per step by part of the cluster: steady when the neighbours are not.
        "cpu_ms_per_step": {
            part: round(seconds * 1000 / (workflows * steps), 3) for part, seconds in spent.items()
        },
        "stolen_share": round(stolen, 3),
    }
    progress.done(
        f"{result['steps_per_s']:.0f} steps/s, {result['workflows_per_s']:.0f} workflows/s"
    )
    return result


def timers(cluster: Cluster, client: Client, workflows: int, seconds: float) -> dict[str, Any]:
    """Workflows that each sleep `seconds`: how late the code resumed after the fire time."""
    progress = Progress("timers")
    _start_all(client, "sleeper", {f"tm-{i}": seconds for i in range(workflows)})
    _wait_closed(cluster.dsn, "tm-", workflows, progress)
    rows = _query(
        cluster.dsn,
        """SELECT convert_from(w.result, 'UTF8')::jsonb #>> '{}', e.due_at FROM history.workflows w
           JOIN history.events e USING (workflow_id)
           WHERE w.workflow_id LIKE 'tm-%%' AND e.event_type = 'TIMER_STARTED'""",
        [],
    )
    lateness = [(datetime.fromisoformat(r[0]) - r[1]).total_seconds() for r in rows]
    result = {"workflows": workflows, "sleep_s": seconds, **summary_ms(lateness)}
    result["early"] = sum(1 for value in lateness if value < 0)
    result["min_ms"] = round(min(lateness) * 1000, 3)
    progress.done(f"lateness {result['median_ms']:.1f} ms median, {result['p99_ms']:.1f} ms p99")
    return result


def timers_at_once(cluster: Cluster, client: Client, workflows: int, lead: float) -> dict[str, Any]:
    """Workflows that each sleep until the same moment, `lead` seconds after the first start
    (time enough for every start and every run's first task): how fast they fire, and how
    late each resumed."""
    progress = Progress(f"{workflows} timers at once")
    due = datetime.now(UTC) + timedelta(seconds=lead)
    _start_all(client, "sleep_until", {f"tw-{i}": due.isoformat() for i in range(workflows)})
    _wait_closed(cluster.dsn, "tw-", workflows, progress)
    [(in_time,)] = _query(
        cluster.dsn,
        "SELECT count(*) FROM history.events WHERE workflow_id LIKE 'tw-%%'"
        " AND event_type = 'TIMER_STARTED' AND created_at < due_at",
        [],
    )
    rows = _query(
        cluster.dsn,
        "SELECT convert_from(result, 'UTF8')::jsonb #>> '{}' FROM history.workflows"
        " WHERE workflow_id LIKE 'tw-%%'",
        [],
    )
    resumed = sorted(datetime.fromisoformat(row[0]) for row in rows)
    lateness = [(moment - due).total_seconds() for moment in resumed]
    firing = (resumed[-1] - due).total_seconds()
    result = {
        "workflows": workflows,
        "lead_s": lead,
        # Timers set before their moment: the others found it past and are not measured.
        "set_in_time": in_time,
        "fired_per_s": round(workflows / firing, 1) if firing > 0 else None,
        **summary_ms(lateness),
        "early": sum(1 for value in lateness if value < 0),
    }
    progress.done(
        f"{result['fired_per_s']}/s, lateness {result['median_ms']:.0f} ms median, "
        f"{result['early']} early"
    )
    return result


def signals(cluster: Cluster, client: Client, workflows: int) -> dict[str, Any]:
    """One waiting workflow signalled at a time: signal sent to the next step's start."""
    progress = Progress("signals")
    ids = [f"sg-{i}" for i in range(workflows)]
    _start_all(client, "signalled", {workflow_id: None for workflow_id in ids})
    deadline = time.monotonic() + TIMEOUT
    while any(client.describe(w).workflow.wait.name != "go" for w in ids):
        if time.monotonic() > deadline:
            raise TimeoutError("signal workflows never waited")
        time.sleep(0.05)
    latencies = []
    for index, workflow_id in enumerate(ids):
        sent = time.time()
        client.signal(workflow_id, "go")
        resumed = from_payload(client.wait(workflow_id, timeout=TIMEOUT).workflow.result)
        latencies.append(datetime.fromisoformat(resumed).timestamp() - sent)
        progress.update(index + 1, workflows)
    result = {"workflows": workflows, **summary_ms(latencies)}
    progress.done(f"{result['median_ms']:.1f} ms median, {result['p99_ms']:.1f} ms p99")
    return result


def recovery(cluster: Cluster, client: Client, workflows: int, scratch: Path) -> dict[str, Any]:
    """SIGKILL a worker holding `workflows` running steps: time until every one of them made
    progress again on the other worker."""
    progress = Progress("recovery")
    cluster.stop_workers()
    [victim] = cluster.start_workers(1, concurrency=workflows)
    gate = scratch / "recovery-gate"
    _start_all(client, "held", {f"rc-{i}": str(gate) for i in range(workflows)})
    _wait_until(
        lambda: (
            _query(
                cluster.dsn,
                "SELECT count(*) FROM scheduler.tasks WHERE lease_owner IS NOT NULL",
                [],
            )[0][0]
            >= workflows
        ),
        "the victim to hold every workflow",
    )
    cluster.start_workers(1, concurrency=workflows)
    killed = time.time()
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    gate.touch()
    _wait_closed(cluster.dsn, "rc-", workflows, progress)
    rows = _query(
        cluster.dsn,
        "SELECT convert_from(result, 'UTF8')::jsonb #>> '{}' FROM history.workflows"
        " WHERE workflow_id LIKE 'rc-%%'",
        [],
    )
    delays = [datetime.fromisoformat(r[0]).timestamp() - killed for r in rows]
    cluster.stop_workers()
    result = {
        "workflows": workflows,
        "all_s": round(max(delays), 3),
        "median_s": round(statistics.median(delays), 3),
    }
    progress.done(f"all {workflows} going again after {result['all_s']:.2f} s")
    return result


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cells(
    scratch: Path, counts: tuple[int, ...], workflows: int, concurrency: int
) -> dict[str, Any]:
    """Throughput of 10-step workflows on a fresh cluster of each number of cells (two workers
    serving every cell), the same machine and database server: what a second database and its
    own history and scheduler add, and what the gateway's placement costs a start."""
    print("cells", flush=True)
    found: dict[str, Any] = {}
    for count in counts:
        cluster = Cluster(scratch / f"cells-{count}", cells=count)
        cluster.workdir.mkdir()
        cluster.start()
        try:
            with Client(cluster.gateway, timeout=60, api_key=cluster.client_key) as client:
                cluster.start_workers(2, concurrency)
                measured = throughput(cluster, client, workflows, 10, f"{count}-cells")
                per_cell = [
                    _query(dsn, "SELECT count(*) FROM history.workflows", [])[0][0]
                    for dsn in cluster.dsns
                ]
                found[str(count)] = {**measured, "runs_per_cell": per_cell}
        finally:
            cluster.close()
    return found
