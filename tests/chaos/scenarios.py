"""The faults, each a scenario of its own, and a random schedule of all of them; and the run of a
scenario: faults under load, heal, quiesce, check."""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import psycopg

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.worker._payload import to_payload
from tests.chaos.checker import Report, check
from tests.chaos.harness import GATEWAYS, HISTORIES, SCHEDULERS, WORKERS, ChaosCluster
from tests.chaos.proxy import HOLD_REPLIES, HOLD_REQUESTS, PARTITION, RESET, Fault
from tests.chaos.workload import HEALED, Workload

QUIESCE_TIMEOUT = 180.0
PROMPT_STOP_SECONDS = 8.0  # a service's grace period is 10 s: a stop that needs it is a hang
HEALED_LOAD_SECONDS = 3.0
STALE_REFUSED = "refused a write with stale fence"
LEASE_EXPIRED = re.compile(r"lease of (\S+) expired \(holder \S+\); taking over with fence (\d+)")
RUNNING = re.compile(r"running ledger_run (\S+) \(fence (\d+)\)")


@dataclass
class FaultLog:
    """The faults injected, and what a fault's own checks found."""

    injected: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        """Count one injected fault."""
        self.injected[what] += 1


Scenario = Callable[[ChaosCluster, random.Random, FaultLog, float], None]


def _until(seconds: float) -> Callable[[], bool]:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() < deadline


def _pause(rng: random.Random, low: float, high: float) -> None:
    time.sleep(rng.uniform(low, high))


def kill(names: tuple[str, ...]) -> Scenario:
    """kill -9 one of `names`, restart it a moment later; again until the time is up."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        running = _until(duration)
        while running():
            name = rng.choice(names)
            cluster.kill(name)
            log.note(f"kill -9 {cluster.members[name].kind}")
            _pause(rng, 0.3, 2.0)
            cluster.restart(name)
            _pause(rng, 0.5, 1.5)

    return scenario


def _busy_worker(cluster: ChaosCluster) -> str:
    """A worker that is inside a step body right now (it logged an execution a moment ago)."""
    pids = {m.current.popen.pid: name for name, m in cluster.members.items() if name in WORKERS}
    deadline = time.monotonic() + 10
    with cluster.connect() as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT pid FROM chaos.executions WHERE at > clock_timestamp() - interval '50 ms'"
                " ORDER BY at DESC LIMIT 1"
            ).fetchone()
            if row and row[0] in pids:
                return pids[row[0]]
            time.sleep(0.01)
    return WORKERS[0]


def pause_worker(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
    """SIGSTOP a worker in the middle of a step for longer than its lease, then SIGCONT: its
    work goes to another worker with a higher fence, and its late writes must be refused."""
    running = _until(duration)
    refused_before = cluster.logs("history").count(STALE_REFUSED)
    cycles = 0
    # Until the time is up, and until a late write was refused (a few tries at most): the
    # worker may finish its step before it is paused, or learn of its lost lease before it
    # writes again.
    while running() or (
        cycles < 3 and cluster.logs("history").count(STALE_REFUSED) == refused_before
    ):
        cycles += 1
        _stop_past_lease(cluster, _busy_worker(cluster), rng, log)


def pause_scheduler(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """SIGSTOP a scheduler replica for longer than a lease, then SIGCONT."""
    running = _until(duration)
    while running():
        _stop_past_lease(cluster, rng.choice(SCHEDULERS), rng, log)


def _stop_past_lease(cluster: ChaosCluster, name: str, rng: random.Random, log: FaultLog) -> None:
    """SIGSTOP one process for longer than a lease lasts, then SIGCONT."""
    cluster.pause(name)
    log.note(f"SIGSTOP {cluster.members[name].kind} past a lease")
    time.sleep(cluster.lease_ttl * 1.5 + rng.uniform(0, 1))
    cluster.resume(name)
    _pause(rng, 0.5, 1.5)


def database_crash(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """PostgreSQL stopped with -m immediate (a crash: WAL recovery at restart), then started."""
    running = _until(duration)
    while running():
        _pause(rng, 0.5, 2.0)
        cluster.stop_database()
        log.note("PostgreSQL stop -m immediate")
        _pause(rng, 0.5, 3.0)
        cluster.start_database()  # returns once it accepts connections


def partition(source_kind: str, target_kind: str, faults: tuple[Fault, ...]) -> Scenario:
    """Cut one process of `source_kind` off the `target_kind` processes (both ways or one way),
    for about a lease or more, then let it through again."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        sources = sorted({link.source for link in cluster.links(source_kind, target_kind)})
        running = _until(duration)
        while running():
            fault = rng.choice(faults)
            links = cluster.links(source_kind, target_kind, rng.choice(sources))
            with cluster.faulted(links, fault):
                log.note(f"partition {source_kind}->{target_kind} {fault.describe()}")
                time.sleep(rng.uniform(0.5, 2.0) * cluster.lease_ttl)
            _pause(rng, 0.5, 1.5)

    return scenario


def flapping(source_kind: str, target_kind: str) -> Scenario:
    """The links between two kinds go down and up every fraction of a second."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        links = cluster.links(source_kind, target_kind)
        running = _until(duration)
        while running():
            with cluster.faulted(links, rng.choice((PARTITION, HOLD_REQUESTS, RESET))):
                log.note(f"flap {source_kind}->{target_kind}")
                _pause(rng, 0.2, 1.0)
            _pause(rng, 0.2, 1.0)

    return scenario


def slow_network(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
    """Every link between services and to the database adds a delay to each chunk, changing
    every few seconds (the client's links stay fast: its calls would just time out)."""
    links = [link for link in cluster.proxy.links if link.source != "client"]
    running = _until(duration)
    while running():
        delay = rng.choice((0.02, 0.1, 0.3))
        with cluster.faulted(links, Fault(delay=delay)):
            log.note(f"delay {delay:g}s on every link")
            _pause(rng, 2.0, 4.0)


def lost_replies(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
    """Database calls of history and scheduler are served, and some answers never come back
    (the connection is cut instead): a commit whose caller cannot know it happened."""
    links = cluster.links("history", "database") + cluster.links("scheduler", "database")
    before = sum(link.lost_replies for link in links)
    with cluster.faulted(links, Fault(lose_replies=0.05)):
        time.sleep(duration)
    log.injected["database reply lost after the call was served"] += (
        sum(link.lost_replies for link in links) - before
    )


def duplicate_completions(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """Completions sent again by a worker that already completed: finishing a finished run
    (same and other result) and recording a recorded step otherwise. Each must leave the
    journal as it was."""
    address = cluster.members[rng.choice(HISTORIES)].listen
    assert address
    running = _until(duration)
    done: set[str] = set()
    with grpc.insecure_channel(address) as channel, cluster.connect() as conn:
        journal = jgrpc.JournalServiceStub(channel)
        while running():
            rows = conn.execute(
                "SELECT workflow_id, fence, event_count, result, result_encoding"
                " FROM history.workflows"
                " WHERE status = 'COMPLETED' AND closed_at > now() - interval '10 s'"
            ).fetchall()
            for workflow_id, fence, event_count, result, encoding in rows:
                if workflow_id in done:
                    continue
                done.add(workflow_id)
                same = Payload(encoding=encoding, data=result)
                _complete_again(journal, workflow_id, fence, same)
                log.note("duplicate completion")
                after = conn.execute(
                    "SELECT event_count, result FROM history.workflows WHERE workflow_id = %s",
                    [workflow_id],
                ).fetchone()
                if after != (event_count, result):
                    log.violations.append(f"{workflow_id}: a duplicate completion changed it")
            time.sleep(0.3)


def _complete_again(
    journal: jgrpc.JournalServiceStub, workflow_id: str, fence: int, same: Payload
) -> None:
    other = to_payload("another outcome")
    calls = [
        (
            journal.FinishWorkflow,
            jpb.FinishWorkflowRequest(workflow_id=workflow_id, fence=fence, result=same),
        ),
        (
            journal.FinishWorkflow,
            jpb.FinishWorkflowRequest(workflow_id=workflow_id, fence=fence, result=other),
        ),
        (
            journal.RecordStep,
            jpb.RecordStepRequest(
                workflow_id=workflow_id,
                fence=fence,
                step_id="effect-1",
                step_name="effect-1",
                position=1,
                attempt=1,
                output=other,
            ),
        ),
    ]
    for method, request in calls:
        with contextlib.suppress(grpc.RpcError):  # refused or not, the journal must not change
            method(request, timeout=10)


def sigterm_worker(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """SIGTERM a worker in the middle of its work: it drains, releases what it holds and exits,
    and none of its leases is left to expire."""
    running = _until(duration)
    while running():
        name = _busy_worker(cluster)
        member = cluster.members[name]
        held = set(RUNNING.findall(member.current.output()))
        expired_before = _expired(cluster)
        code = cluster.terminate(name)
        log.note("SIGTERM worker during work")
        if code != 0:
            log.violations.append(f"{name} exited {code} after SIGTERM")
        time.sleep(cluster.lease_ttl * 1.5)  # an expiry, had a lease dangled, would show by now
        for workflow_id, fence in sorted(held & (_expired(cluster) - expired_before)):
            log.violations.append(f"{name} left the lease of {workflow_id} (fence {fence})")
        cluster.restart(name)
        _pause(rng, 0.5, 1.5)


def _expired(cluster: ChaosCluster) -> set[tuple[str, str]]:
    """The (workflow id, fence) of every lease the schedulers saw expire."""
    return {
        (workflow_id, str(int(fence) - 1))
        for workflow_id, fence in LEASE_EXPIRED.findall(cluster.logs("scheduler"))
    }


def sigterm_service(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """SIGTERM history, scheduler and gateway replicas under load, in a random order, each
    started again at once: a stop must come promptly, not at the end of the grace period."""
    running = _until(duration)
    services = [*HISTORIES, *SCHEDULERS, *GATEWAYS]
    while running():
        rng.shuffle(services)
        for name in services:
            began = time.monotonic()
            code = cluster.terminate(name)
            took = time.monotonic() - began
            log.note(f"SIGTERM {cluster.members[name].kind}")
            if code != 0 or took > PROMPT_STOP_SECONDS:
                log.violations.append(f"{name} exited {code} {took:.1f}s after SIGTERM")
            cluster.restart(name)
            _pause(rng, 0.3, 1.0)


SCENARIOS: dict[str, Scenario] = {
    "kill-worker": kill(WORKERS),
    "kill-history": kill(HISTORIES),
    "kill-scheduler": kill(SCHEDULERS),
    "kill-gateway": kill(GATEWAYS),
    "pause-worker": pause_worker,
    "pause-scheduler": pause_scheduler,
    "database-crash": database_crash,
    "partition-worker-scheduler": partition("worker", "scheduler", (PARTITION, HOLD_REQUESTS)),
    "partition-worker-history": partition(
        "worker", "history", (PARTITION, HOLD_REQUESTS, HOLD_REPLIES, RESET)
    ),
    "partition-history-scheduler": partition(
        "history", "scheduler", (PARTITION, HOLD_REQUESTS, HOLD_REPLIES)
    ),
    "flapping-history-scheduler": flapping("history", "scheduler"),
    "flapping-worker-history": flapping("worker", "history"),
    "flapping-worker-scheduler": flapping("worker", "scheduler"),
    "slow-network": slow_network,
    "lost-database-replies": lost_replies,
    "duplicate-completions": duplicate_completions,
    "sigterm-worker": sigterm_worker,
    "sigterm-service": sigterm_service,
}
# Faults whose point is a stale lease writing late: the run must show refused writes.
PROVOKES_STALE_WRITES = {"pause-worker"}


def random_schedule(slice_seconds: float) -> Scenario:
    """Every fault in a random order and mix, `slice_seconds` each, until the time is up."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        running = _until(duration)
        names = list(SCENARIOS)
        rng.shuffle(names)
        for name in ["pause-worker", *names]:  # a stale lease, however short the run
            if not running():
                break
            SCENARIOS[name](cluster, rng, log, slice_seconds)

    return scenario


@dataclass
class Outcome:
    """A scenario's report, faults, and the stale writes refused while it ran."""

    name: str
    seed: int
    report: Report
    faults: FaultLog
    stale_refused: int
    leases_expired: int

    def violations(self) -> list[str]:
        """Everything that went wrong."""
        return self.report.violations + self.faults.violations

    def summary(self) -> str:
        """The scenario's numbers on one line."""
        return (
            f"{self.name} seed={self.seed}: {self.report.summary()} "
            f"faults={dict(self.faults.injected)} stale-writes-refused={self.stale_refused} "
            f"leases-expired={self.leases_expired}"
        )


def run_scenario(
    cluster: ChaosCluster, name: str, scenario: Scenario, seed: int, duration: float
) -> Outcome:
    """Load, faults for `duration`, heal, a little healed load, quiesce, check."""
    workload = Workload(cluster.gateways, prefix=f"{name}-{seed}", seed=seed)
    faults = FaultLog()

    def faulted() -> None:
        time.sleep(1.0)
        try:
            scenario(cluster, random.Random(seed), faults, duration)
        finally:
            cluster.heal()
        workload.phase = HEALED
        time.sleep(HEALED_LOAD_SECONDS)
        workload.stop(timeout=QUIESCE_TIMEOUT / 2)

    return observe(cluster, name, seed, workload, faults, faulted)


def observe(
    cluster: ChaosCluster,
    name: str,
    seed: int,
    workload: Workload,
    faults: FaultLog,
    meanwhile: Callable[[], None],
) -> Outcome:
    """Start the workload, do `meanwhile` (which ends once the workload has stopped), quiesce,
    check; count the stale writes refused and the leases expired on the way."""
    stale_before = cluster.logs("history").count(STALE_REFUSED)
    expired_before = len(LEASE_EXPIRED.findall(cluster.logs("scheduler")))
    workload.start()
    meanwhile()
    with cluster.connect() as conn:
        _quiesce(conn, workload.prefix)
        report = check(conn, workload)
    return Outcome(
        name,
        seed,
        report,
        faults,
        cluster.logs("history").count(STALE_REFUSED) - stale_before,
        len(LEASE_EXPIRED.findall(cluster.logs("scheduler"))) - expired_before,
    )


def _quiesce(conn: psycopg.Connection, prefix: str) -> None:
    """Wait until no run of the workload is open (the checker reports those that stay open)."""
    deadline = time.monotonic() + QUIESCE_TIMEOUT
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM history.workflows WHERE workflow_id LIKE %s"
            " AND status IN ('RUNNING', 'WAITING')",
            [f"{prefix}-%"],
        ).fetchone()
        if row is not None and row[0] == 0:
            return
        time.sleep(0.5)
