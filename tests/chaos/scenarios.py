"""The faults, each a scenario of its own, and a random schedule of all of them; and the run of a
scenario: faults under load, heal, quiesce, check."""

from __future__ import annotations

import contextlib
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import psycopg

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import to_payload
from tests.chaos.checker import Report, check
from tests.chaos.harness import GATEWAYS, HISTORIES, SCHEDULERS, WORKERS, ChaosCluster
from tests.chaos.long_steps import LONG_STEP_SCENARIOS
from tests.chaos.proxy import HOLD_REPLIES, HOLD_REQUESTS, PARTITION, RESET, Fault
from tests.chaos.workflows import CRASH_RETRY
from tests.chaos.workload import HEALED, Workload

QUIESCE_TIMEOUT = 180.0
PROMPT_STOP_SECONDS = 8.0  # a service's grace period is 10 s: a stop that needs it is a hang
HEALED_LOAD_SECONDS = 3.0
STALE_REFUSED = "refused a write with stale fence"
LEASE_EXPIRED = re.compile(r"lease of (\S+) expired \(holder \S+\); taking over with fence (\d+)")
RUNNING = re.compile(r"running ledger_run (\S+) \(fence (\d+)\)")
JOURNAL_CALL_FAILED = "journal call failed"
STRANDED = "with no lease, no task and no wake-up"
OVERSIZED_OUTPUTS = 44
OVERSIZED_OUTPUT_BYTES = 1536 * 1024


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


# --- steps that break their worker: each scenario starts one run of its own next to the load,
# waits for it to end and checks its journal. ---------------------------------------------------

BROKEN_STEP_TIMEOUT = 120.0
OPEN_STATUSES = ("RUNNING", "WAITING")


def _start_alone(cluster: ChaosCluster, workflow_type: str) -> str:
    workflow_id = f"{workflow_type}-{uuid.uuid4().hex[:8]}"
    with Client(cluster.gateways[0]) as client:
        client.start_workflow(workflow_type, workflow_id=workflow_id)
    return workflow_id


def _status(conn: psycopg.Connection, workflow_id: str) -> str:
    row = conn.execute(
        "SELECT status FROM history.workflows WHERE workflow_id = %s", [workflow_id]
    ).fetchone()
    assert row is not None
    return str(row[0])


def _wait_closed(
    cluster: ChaosCluster, conn: psycopg.Connection, workflow_id: str, log: FaultLog
) -> str:
    """Wait for the run to close, starting again any worker that died meanwhile (a step that
    kills its worker); its status."""
    deadline = time.monotonic() + BROKEN_STEP_TIMEOUT
    while (status := _status(conn, workflow_id)) in OPEN_STATUSES:
        if time.monotonic() > deadline:
            log.violations.append(f"{workflow_id} still {status} after {BROKEN_STEP_TIMEOUT:g}s")
            break
        for name in WORKERS:
            if not cluster.members[name].alive() and name not in cluster.paused:
                log.note("worker killed by its step (os._exit)")
                cluster.restart(name)
        time.sleep(0.2)
    for name in WORKERS:  # the last crash may come after the run closed (another worker's)
        cluster.restart(name)
    return status


def _attempts(conn: psycopg.Connection, workflow_id: str, step_id: str) -> list[tuple[Any, ...]]:
    """The step's events: (event type, attempt, failure type, created_at, due_at)."""
    return conn.execute(
        "SELECT event_type, attempt, failure->>'type', created_at, due_at FROM history.events"
        " WHERE workflow_id = %s AND step_id = %s ORDER BY event_id",
        [workflow_id, step_id],
    ).fetchall()


def crash_loop(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
    """A step that os._exits every worker it runs on ends failed after its maximum attempts,
    each lost attempt a WorkerLostError, with the policy's backoff before the next start."""
    workflow_id = _start_alone(cluster, "crash_loop")
    with cluster.connect() as conn:
        status = _wait_closed(cluster, conn, workflow_id, log)
        events = _attempts(conn, workflow_id, "crash")
    if status != "FAILED":
        log.violations.append(f"{workflow_id}: a crash-looping step left the run {status}")
    attempts = CRASH_RETRY.maximum_attempts
    kinds = [(kind, attempt) for kind, attempt, *_ in events]
    expected = []
    for attempt in range(1, attempts + 1):
        outcome = "STEP_ATTEMPT_FAILED" if attempt < attempts else "STEP_FAILED"
        expected += [("STEP_ATTEMPT_STARTED", attempt), (outcome, attempt)]
    if kinds != expected:
        log.violations.append(f"{workflow_id}: attempts journaled {kinds}, not {expected}")
        return
    failures = [event for event in events if event[0] != "STEP_ATTEMPT_STARTED"]
    starts = [event for event in events if event[0] == "STEP_ATTEMPT_STARTED"]
    if {failure[2] for failure in failures} != {"WorkerLostError"}:
        log.violations.append(f"{workflow_id}: lost attempts failed as {failures}")
    pairs = zip(failures[:-1], starts[1:], strict=True)  # each loss, and the start after it
    for attempt, (failure, next_start) in enumerate(pairs, start=1):
        _, _, _, failed_at, retry_at = failure
        backoff = (retry_at - failed_at).total_seconds()
        if backoff < CRASH_RETRY.delay(attempt) - 0.01 or next_start[3] < retry_at:
            log.violations.append(
                f"{workflow_id}: attempt {attempt + 1} started at {next_start[3]}, its retry was "
                f"due at {retry_at} ({backoff:.2f}s after the loss)"
            )


def hung_step(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
    """A sync step that hangs without a heartbeat fails with StepHeartbeatTimeoutError after its
    heartbeat timeout, its thread abandoned, and its retry completes the run."""
    workflow_id = _start_alone(cluster, "hung_step")
    log.note("hung step (no heartbeat)")
    with cluster.connect() as conn:
        status = _wait_closed(cluster, conn, workflow_id, log)
        events = [
            (kind, attempt, cause)
            for kind, attempt, cause, *_ in _attempts(conn, workflow_id, "hang")
        ]
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM chaos.executions WHERE workflow_id = %s ORDER BY at", [workflow_id]
            )
        ]
    expected = [
        ("STEP_ATTEMPT_STARTED", 1, None),
        ("STEP_ATTEMPT_FAILED", 1, "StepHeartbeatTimeoutError"),
        ("STEP_ATTEMPT_STARTED", 2, None),
        ("STEP_COMPLETED", 2, None),
    ]
    if status != "COMPLETED" or events != expected:
        log.violations.append(f"{workflow_id}: {status}, attempts {events}, not {expected}")
    print(f"hung step: attempt 1 in pid {pids[:1]}, the retry in pid {pids[1:]}")


def abandoned_sync_steps(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """Six sync steps time out on one worker, their threads still running; a seventh on the
    same worker starts at once and completes within its own time limit."""
    workflow_id = _start_alone(cluster, "abandoned_threads")
    log.note("six sync steps abandoned on one worker")
    with cluster.connect() as conn:
        status = _wait_closed(cluster, conn, workflow_id, log)
        outcomes = conn.execute(
            "SELECT step_id, event_type, failure->>'type' FROM history.events"
            " WHERE workflow_id = %s AND event_type IN ('STEP_COMPLETED', 'STEP_FAILED')"
            " ORDER BY event_id",
            [workflow_id],
        ).fetchall()
    expected = [
        *((f"hang-{n}", "STEP_FAILED", "StepTimeoutError") for n in range(1, 7)),
        ("seventh", "STEP_COMPLETED", None),
    ]
    if status != "COMPLETED" or [tuple(row) for row in outcomes] != expected:
        log.violations.append(f"{workflow_id}: {status}, outcomes {outcomes}, not {expected}")


def scheduler_reset(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """The schedulers' database reset to empty under load: both replicas killed, their tables
    emptied (every task, lease, due time and fence counter gone), both started again. Every
    open run must end all the same: history's stranded-run sweep makes it due again, and the
    next grant is above its fence mark."""
    running = _until(duration)
    swept_before = cluster.logs("history").count(STRANDED)
    while running():
        _pause(rng, 1.0, 3.0)
        for name in SCHEDULERS:
            cluster.kill(name)
        with cluster.connect() as conn:
            conn.execute("TRUNCATE scheduler.tasks, scheduler.workflow_types")
        log.note("scheduler database reset to empty")
        for name in SCHEDULERS:
            cluster.restart(name)
        _pause(rng, 1.0, 2.0)
    # Shown in the summary: how many runs the sweep found stranded so far (more may follow).
    log.injected["stranded runs made due again"] += (
        cluster.logs("history").count(STRANDED) - swept_before
    )


def oversized_journal(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """Beside the load, a run whose journal outgrows one message (44 outputs of 1.5 MiB: 66 MiB,
    over the 64 MiB message limit) is loaded again, in pages and with its outputs as payload
    references: it completes, and no other run loses its lease to it (no lease expires, no
    worker's journal call fails)."""
    expired_before = _expired(cluster)
    failed_before = cluster.logs("worker").count(JOURNAL_CALL_FAILED)
    workflow_id = f"oversized-{rng.randrange(10**9)}"
    with Client(cluster.gateways[0]) as client:
        params = {"count": OVERSIZED_OUTPUTS, "size": OVERSIZED_OUTPUT_BYTES}
        client.start_workflow("bulky_run", params, workflow_id=workflow_id)
    log.note("a run with an oversized journal")
    deadline = time.monotonic() + max(duration, QUIESCE_TIMEOUT / 2)
    outcome = None
    with cluster.connect() as conn:
        while time.monotonic() < deadline and outcome is None:
            outcome = conn.execute(
                "SELECT status, failure->>'type' FROM history.workflows"
                " WHERE workflow_id = %s AND status NOT IN ('RUNNING', 'WAITING')",
                [workflow_id],
            ).fetchone()
            time.sleep(0.5)
    if outcome != ("COMPLETED", None):
        log.violations.append(f"{workflow_id}: did not complete: {outcome}")
    # However large, the run can be described and its history read.
    with Client(cluster.gateways[0]) as client:
        steps = client.describe(workflow_id).steps
        outputs = sum(
            event.event_type == wf.EVENT_TYPE_STEP_COMPLETED
            for event in client.history(workflow_id)
        )
    shown = [step for step in steps if not step.output_omitted]
    if not (len(steps) == outputs == OVERSIZED_OUTPUTS and 0 < len(shown) < len(steps)):
        log.violations.append(f"{workflow_id}: described or read wrong ({len(shown)} shown)")
    lost = sorted(_expired(cluster) - expired_before)
    if lost:
        log.violations.append(f"leases expired beside the oversized journal: {lost}")
    if cluster.logs("worker").count(JOURNAL_CALL_FAILED) != failed_before:
        log.violations.append("a worker's journal call failed beside the oversized journal")


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
    **LONG_STEP_SCENARIOS,
    "crash-loop-step": crash_loop,
    "hung-step": hung_step,
    "abandoned-sync-steps": abandoned_sync_steps,
    "scheduler-reset": scheduler_reset,
    "oversized-journal": oversized_journal,
}
# Scenarios that run until a run of their own ends, whatever the duration: not in the random
# schedule, whose slices are short.
SELF_TIMED = {"crash-loop-step", "hung-step", "abandoned-sync-steps"}
# Faults whose point is a stale lease writing late: the run must show refused writes.
PROVOKES_STALE_WRITES = {"pause-worker"}
# Scenarios that measure what other faults would blur (every lease kept): never in a mix.
ALONE = {"oversized-journal"}


def random_schedule(slice_seconds: float) -> Scenario:
    """Every fault in a random order and mix, `slice_seconds` each, until the time is up."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        running = _until(duration)
        # Long-step, self-timed and lone scenarios wait for runs of their own, longer than a
        # slice.
        names = [
            name
            for name in SCENARIOS
            if name not in LONG_STEP_SCENARIOS and name not in SELF_TIMED and name not in ALONE
        ]
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


def assert_clean(outcome: Outcome) -> None:
    """Nothing lost, nothing doubled, nothing stuck; and the faults did happen."""
    print(outcome.summary())
    assert outcome.violations() == []
    assert outcome.report.workflows > 0 and outcome.faults.injected
    assert outcome.report.completed > 0


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


def lease_stories(cluster: ChaosCluster, prefix: str, limit: int = 400) -> str:
    """What every process logged about the runs of a workload whose lease expired, in time
    order: why a lease expired where nothing was meant to make one expire."""
    expired = {workflow_id.split("/")[0] for workflow_id, _ in _expired(cluster)}
    runs = sorted(w for w in expired if w.startswith(f"{prefix}-"))
    lines = [
        f"{member}: {line}"
        for member, process in cluster.members.items()
        for line in process.output().splitlines()
        if any(run in line for run in runs)
        or "renew" in line
        or "stream lost" in line
        or "blocked for" in line
        or line.endswith(" stopped")
    ]
    lines.sort(key=lambda line: line.split(": ", 1)[1][:23])
    return f"runs whose lease expired: {runs}\n" + "\n".join(lines[:limit])


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
