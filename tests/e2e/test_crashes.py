"""What happens when processes die or stall at the worst moment."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client, RpcError
from perdure.common.embedded_db import stop_embedded_postgres
from perdure.worker._payload import from_payload, to_payload
from tests.e2e.blocking import WAIT, runs_per_step, start_blocked, started
from tests.fixtures.cluster import Cluster, Process, wait_connected, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.postgres import with_database


@pytest.mark.parametrize("keys", [False, True], ids=["no-keys", "keys"])
def test_worker_killed_mid_step_is_resumed_by_another(
    start_cluster: Callable[..., Cluster], tmp_path: Path, keys: bool
) -> None:
    # A killed worker says no goodbye: its lease stands until it expires (its steps might
    # still run), then the work goes over with the next fence (with keys, to the same key).
    cluster = start_cluster(PERDURE_LEASE_TTL="2", PERDURE_AUTH="on" if keys else "off")
    worker_key = make_key(cluster, "default", "worker", "*") if keys else None
    operator = make_key(cluster, "default", "operator") if keys else None

    def start_worker(identity: str) -> Process:
        if worker_key is None:
            return cluster.start_worker(identity)
        return cluster.start_worker(identity, PERDURE_API_KEY=worker_key)

    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    first = start_worker("first")
    with Client(cluster.gateway, api_key=operator) as client:
        start_blocked(client, "crash-1", ledger, gate)
        first.kill()
        gate.touch()
        second = start_worker("second")
        described = client.wait("crash-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    runs = runs_per_step(ledger)
    assert runs["step_1"] == 1 and runs["step_2"] == 1
    assert runs["step_3"] >= 1 and runs["step_4"] == 1
    assert started(ledger, "step_3")[0] == str(first.popen.pid)
    assert from_payload(described.workflow.result)["step_3_pid"] == second.popen.pid
    assert "Skipping completed step: step_1" in second.output()
    assert "Skipping completed step: step_2" in second.output()
    # The attempt the crash cut short counts: the second lease (fence 2) recorded it lost, and
    # the retry ran under the next lease (fence 3), which wrote everything after it.
    fences = {s.step_id: s.fence for s in described.steps}
    assert fences["step_1"] == fences["step_2"] == 1
    assert fences["step_3"] == fences["step_4"] == 3
    (lost,) = [s for s in described.steps if s.step_id == "step_3"]
    assert lost.attempts == 2


def test_paused_worker_is_fenced_out(start_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    paused = cluster.start_worker("paused")
    with cluster.client() as client:
        start_blocked(client, "fence-1", ledger, gate)
        paused.signal(signal.SIGSTOP)  # holds its TCP connection, stops heartbeating
        successor = cluster.start_worker("successor")
        wait_until(lambda: len(started(ledger, "step_3")) == 2, WAIT, "the takeover after expiry")
        gate.touch()
        described = client.wait("fence-1", timeout=WAIT)
        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        paused.signal(signal.SIGCONT)
        # Resumed past its lease's deadline, the holder either stops its work before writing
        # (self-fencing) or writes first and is refused: never both bodies' records.
        wait_until(
            lambda: (
                "lease with fence 1 lost" in paused.output()
                or "(fence 1): stopping its work" in paused.output()
            ),
            WAIT,
            "the resumed worker to fence itself or have its write rejected",
        )
        events = list(client.history("fence-1"))

    if "lease with fence 1 lost" in paused.output():
        assert "stale fence 1" in paused.output()
    assert str(successor.popen.pid) in [pid for pid in started(ledger, "step_3")]
    # The paused holder's attempt of step_3 counts: the successor recorded it lost (fence 2),
    # and the retry ran under the next lease (fence 3). Nothing after the takeover is fence 1.
    after_takeover = [
        (wf.EventType.Name(e.event_type), e.step_id, e.attempt, e.fence, e.failure.type)
        for e in events
        if e.step_id in ("step_3", "step_4")
    ]
    assert after_takeover == [
        ("EVENT_TYPE_STEP_ATTEMPT_STARTED", "step_3", 1, 1, ""),
        ("EVENT_TYPE_STEP_ATTEMPT_FAILED", "step_3", 1, 2, "WorkerLostError"),
        ("EVENT_TYPE_STEP_ATTEMPT_STARTED", "step_3", 2, 3, ""),
        ("EVENT_TYPE_STEP_COMPLETED", "step_3", 2, 3, ""),
        ("EVENT_TYPE_STEP_ATTEMPT_STARTED", "step_4", 1, 3, ""),
        ("EVENT_TYPE_STEP_COMPLETED", "step_4", 1, 3, ""),
    ]
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_COMPLETED and events[-1].fence == 3
    assert len(events) == 13  # suspended for the retry between: nothing from the stale holder
    assert from_payload(described.workflow.result)["step_3_pid"] == successor.popen.pid


def test_history_rejects_a_stale_fence_in_the_write_transaction(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    worker = cluster.start_worker("w1")
    with cluster.client() as client:
        start_blocked(client, "fence-2", ledger, gate)
    with grpc.insecure_channel(cluster.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="fence-2", fence=7))
        with pytest.raises(grpc.RpcError) as rejected:
            journal.RecordStep(
                jpb.RecordStepRequest(
                    workflow_id="fence-2",
                    fence=6,
                    step_id="x",
                    step_name="x",
                    position=9,
                    output=to_payload("late"),
                )
            )
        assert rejected.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        gate.touch()
        wait_until(
            lambda: "lease with fence 1 lost" in worker.output(),
            WAIT,
            "the real worker's write to be rejected",
        )
        loaded = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="fence-2", fence=7))
    # Two steps recorded, and the start of the third, whose outcome was refused.
    outcomes = [e.step_id for e in loaded.events if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    assert outcomes == ["step_1", "step_2"]
    starts = [e for e in loaded.events if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_STARTED]
    assert [(e.step_id, e.fence) for e in starts] == [("step_1", 1), ("step_2", 1), ("step_3", 1)]
    assert loaded.workflow.fence == 7


def test_everything_restarts_mid_workflow(tmp_path: Path) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    data_dir = Path(tempfile.mkdtemp(prefix="pdr"))
    dsn = start_database_elsewhere(data_dir)
    cluster = Cluster(with_database(dsn, "postgres"), tmp_path)
    try:
        cluster.start_services()
        cluster.start_worker("before")
        with cluster.client() as client:
            start_blocked(client, "restart-1", ledger, gate)
        cluster.stop()  # kill -9 every service and the worker
        stop_embedded_postgres(data_dir)

        start_database_elsewhere(data_dir)
        gate.touch()
        cluster.start_services()
        after = cluster.start_worker("after")
        with cluster.client() as client:
            described = client.wait("restart-1", timeout=WAIT)
    finally:
        cluster.stop()
        stop_embedded_postgres(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    runs = runs_per_step(ledger)
    assert runs["step_1"] == 1 and runs["step_2"] == 1 and runs["step_4"] == 1
    assert "Skipping completed step: step_2" in after.output()


def start_database_elsewhere(data_dir: Path) -> str:
    """Start an embedded PostgreSQL from another process (it keeps running); return its DSN."""
    code = (
        "import sys; from perdure.common.embedded_db import start_embedded_postgres as start; "
        "print(start(sys.argv[1], keep_running=True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(data_dir)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.strip().splitlines()[-1]


def test_code_that_no_longer_matches_its_journal_is_parked(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger, gate, version = tmp_path / "ledger", tmp_path / "gate", tmp_path / "version"
    version.write_text("fetch")
    first = cluster.start_worker("old-code")
    params = {"ledger": str(ledger), "gate": str(gate), "version_file": str(version)}
    with cluster.client() as client:
        client.start_workflow("version_switch", params, workflow_id="nde-1")
        wait_until(lambda: started(ledger, "wait"), WAIT, "the second step to start")
        first.kill()
        version.write_text("download")  # the "new code" calls another step first
        second = cluster.start_worker("new-code")
        described = client.wait("nde-1", timeout=WAIT)
        events = list(client.history("nde-1"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_PARKED
    assert described.workflow.failure.type == "NonDeterminismError"
    assert "'download'" in described.workflow.failure.message
    assert "'fetch'" in described.workflow.failure.message
    assert "parked" in second.output()
    # The journal is intact: the recorded step is still there, nothing was overwritten.
    assert [s.step_id for s in described.steps] == ["fetch"]
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_PARKED
    assert runs_per_step(ledger) == Counter({"fetch": 1})


def test_history_killed_mid_step_loses_nothing(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    services = {p.name: p for p in cluster.processes}
    # One slot: the lease the worker let expire must not hold it forever.
    worker = cluster.start_worker("w1", concurrency=1)
    with cluster.client() as client:
        start_blocked(client, "history-down", ledger, gate)
        services["history"].kill()
        gate.touch()  # step 3 finishes while history is down: its record cannot be written
        wait_until(
            lambda: "journal call failed" in worker.output(),
            WAIT,
            "the worker to give the workflow up",
        )
        cluster.start_service("history")
        described = client.wait("history-down", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    runs = runs_per_step(ledger)
    assert runs["step_1"] == 1 and runs["step_2"] == 1 and runs["step_4"] == 1
    assert runs["step_3"] == 2  # its first result was never recorded, so it ran again
    assert "Skipping completed step: step_2" in worker.output()


def test_each_scheduler_restart_is_met_with_a_prompt_reconnect(
    start_cluster: Callable[..., Cluster],
) -> None:
    # Restarts in a row (a rolling deploy) never leave the worker waiting the longest delay,
    # longer than a short lease: its backoff starts afresh after every welcomed session, and a
    # wait after a failed connect ends as soon as the scheduler accepts connections again.
    cluster = start_cluster()
    worker = cluster.start_worker("w1")
    restarts = 6
    lags = []
    for restart in range(1, restarts + 1):
        scheduler = next(p for p in reversed(cluster.processes) if p.name == "scheduler")
        scheduler.kill()
        cluster.start_service("scheduler")
        back = time.monotonic()
        connected = restart + 1  # its first session, then one per restart
        wait_until(
            lambda n=connected: worker.output().count("connected:") >= n,
            WAIT,
            "the worker to reconnect",
        )
        lags.append(time.monotonic() - back)
    attempts = re.findall(r"stream lost or refused \(.*\); reconnect attempt \d+", worker.output())
    assert len(attempts) >= restarts  # each logged, with its cause
    assert max(lags) < 2.5, lags  # the longest delay is 5 s


def test_scheduler_restart_mid_step_keeps_the_lease(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # A lease that outlasts the scheduler's restart on a loaded machine: a worker fences itself
    # when renewals fail for three quarters of it, which would (rightly) cost the lease.
    cluster = start_cluster(PERDURE_LEASE_TTL="8")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    services = {p.name: p for p in cluster.processes}
    worker = cluster.start_worker("w1", concurrency=1)
    with cluster.client() as client:
        start_blocked(client, "scheduler-down", ledger, gate)
        holder_before = lease_of(cluster, "scheduler-down")
        services["scheduler"].kill()
        cluster.start_service("scheduler")
        # The reconnected worker's new session takes the lease over by renewing it; a lease
        # lost and granted again would show fence 2 instead.
        wait_until(
            lambda: lease_of(cluster, "scheduler-down")[0] != holder_before[0],
            WAIT,
            "the new session to hold the lease",
        )
        assert lease_of(cluster, "scheduler-down")[1] == 1
        gate.touch()
        described = client.wait("scheduler-down", timeout=WAIT)
        # The lease was handed back: the worker's only slot takes the next workflow.
        client.start_workflow(
            "five_steps", {"ledger": str(tmp_path / "next")}, workflow_id="after-restart"
        )
        after = client.wait("after-restart", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert len(started(ledger, "step_3")) == 1
    assert {s.fence for s in described.steps} == {1}
    assert "revoked" not in worker.output()
    assert after.workflow.status == wf.WORKFLOW_STATUS_COMPLETED


def lease_of(cluster: Cluster, workflow_id: str) -> tuple[str | None, int]:
    """The session holding a workflow's lease and its fence, from the scheduler's table."""
    row = task_columns(cluster, workflow_id, "lease_owner, fence")
    assert row is not None
    return row[0], int(row[1])


def task_columns(cluster: Cluster, workflow_id: str, columns: str) -> tuple[Any, ...] | None:
    """Columns (SQL expressions) of a workflow's task in the scheduler's table; None: no task."""
    with psycopg.connect(cluster.dsn) as conn:
        return conn.execute(
            f"SELECT {columns} FROM scheduler.tasks WHERE workflow_id = %s",
            [workflow_id],
        ).fetchone()


def test_a_task_delivered_past_its_deadline_is_handed_back_not_left_to_expire(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # A worker stopped (SIGSTOP) right after its grant was sent reads the task only once it
    # is resumed, past its own deadline (a quarter of the TTL before the lease's expiry) but
    # before the expiry: it must not start the task, and hands it back rather than leaving
    # the run waiting for the expiry.
    ttl = 12.0
    cluster = start_cluster(PERDURE_LEASE_TTL=f"{ttl:g}")
    late = cluster.start_worker("late")
    # Stopped once it judges deadlines by the database clock, as a running worker does (a grant
    # held before any clock reading is renewed at once, and would not be late).
    wait_connected(late, "read the database clock")
    with cluster.client() as client:
        late.signal(signal.SIGSTOP)
        client.start_workflow(
            "five_steps", {"ledger": str(tmp_path / "ledger")}, workflow_id="late"
        )
        wait_until(lambda: seconds_until_expiry(cluster, "late") is not None, WAIT, "the grant")
        expires_in = seconds_until_expiry(cluster, "late") or 0.0
        time.sleep(max(expires_in - ttl / 6, 0.0))  # past the worker's deadline, not the expiry
        late.signal(signal.SIGCONT)
        described = client.wait("late", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert "(fence 1): the task arrived after its lease's deadline; handing it back" in (
        late.output()
    )
    assert {s.fence for s in described.steps} == {2}  # nothing ran under the late grant
    scheduler = next(p for p in cluster.processes if p.name == "scheduler")
    assert "lease of late expired" not in scheduler.output()


def seconds_until_expiry(cluster: Cluster, workflow_id: str) -> float | None:
    """How long a workflow's lease has left, on the database clock (None: not leased)."""
    row = task_columns(cluster, workflow_id, "extract(epoch FROM lease_expires_at - now())")
    return None if row is None or row[0] is None else float(row[0])


def test_a_frozen_scheduler_replica_costs_no_lease(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # Renewals go round robin over the scheduler replicas. With one frozen (SIGSTOP: its
    # connections stay open, nothing answers), a renewal sent to it times out after an
    # interval. The next attempt used to wait another interval, past the worker's deadline for
    # its leases: every lease was dropped and its work stopped. It now goes at once, to the
    # other replica, and the step runs on.
    ttl = 12.0
    cluster = start_cluster(replicas={"scheduler": 2}, PERDURE_LEASE_TTL=f"{ttl:g}")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    worker = cluster.start_worker("renewing")
    schedulers = [p for p in cluster.processes if p.name == "scheduler"]
    with cluster.client() as client:
        start_blocked(client, "frozen-replica", ledger, gate)
        # The replica without the worker's session: the stream and its grants are untouched.
        [frozen] = [p for p in schedulers if "worker renewing connected" not in p.output()]
        frozen.signal(signal.SIGSTOP)
        try:
            wait_until(
                lambda: "cannot renew" in worker.output(),
                ttl * 4,
                "a renewal sent to the frozen replica to time out",
            )
            time.sleep(ttl)  # past the deadline its lease had from the renewal before
            assert "stopping its work" not in worker.output()
        finally:
            frozen.signal(signal.SIGCONT)
        gate.touch()
        described = client.wait("frozen-replica", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert "leases renewed again, after 1 failed attempt(s)" in worker.output()
    assert len(started(ledger, "step_3")) == 1
    assert {s.fence for s in described.steps} == {1}


def _cut_history_connections(conn: psycopg.Connection[Any], terminated: Counter[str]) -> None:
    """Terminate every connection history holds to the database (as a restart, a failover or
    an operator's pg_terminate_backend would), counted by their names."""
    for name, count in conn.execute(
        "SELECT application_name, count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE pid <> pg_backend_pid() AND datname = current_database()"
        " AND application_name LIKE 'perdure-history%%' GROUP BY application_name"
    ).fetchall():
        terminated[name] += count


def test_history_database_connections_cut_under_load_cost_no_run_and_no_lease(
    start_cluster: Callable[..., Cluster],
) -> None:
    # History's connections to PostgreSQL are terminated again and again while runs take
    # steps and a caller reads. A call that meets a dead connection fails: the caller is
    # answered UNAVAILABLE (retry), never UNKNOWN with a driver's exception, and the pool
    # checks the others it holds at once; a worker sends a journal call answered so again (it
    # is idempotent) instead of giving the run up to its lease's expiry; every run ends with
    # exactly its result, written under its one lease.
    cluster = start_cluster(PERDURE_LEASE_TTL="4")
    worker = cluster.start_worker("cut")
    turns, runs = 25, [f"cut-{index}" for index in range(10)]
    stop, terminated, failures = threading.Event(), Counter[str](), Counter[str]()

    def describe(client: Client, workflow_id: str) -> bool:
        try:
            client.describe(workflow_id)
            return True
        except RpcError as error:
            failures[f"{error.code().name}: {(error.details() or '')[:60]}"] += 1
            return False

    def cut_connections() -> None:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            while not stop.is_set():
                _cut_history_connections(conn, terminated)
                stop.wait(0.25)

    history = next(process for process in cluster.processes if process.name == "history")
    with Client(cluster.gateway) as client:
        for workflow_id in runs:
            client.start_workflow("loop_agent", {"turns": turns}, workflow_id=workflow_id)
        cutter = threading.Thread(target=cut_connections)
        cutter.start()
        try:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                for workflow_id in runs:
                    describe(client, workflow_id)
        finally:
            stop.set()
            cutter.join()
        results = {workflow_id: client.result(workflow_id, timeout=WAIT) for workflow_id in runs}
        fences = {
            workflow_id: (
                client.describe(workflow_id).workflow.fence,
                {e.fence for e in client.history(workflow_id) if e.fence},
            )
            for workflow_id in runs
        }

    # History names its connections (its pool, its records pool, its LISTEN connection),
    # and met them lost: its pools replaced them.
    assert terminated["perdure-history"] > 0 and terminated["perdure-history-records"] > 0
    assert "discarding" in history.output(), "history never met a lost connection"
    unavailable = "UNAVAILABLE: the database failed this call"
    assert all(failure.startswith(unavailable) for failure in failures), failures
    for workflow_id, result in results.items():
        keys = [f"{workflow_id}:model"] + [f"{workflow_id}:model#{n}" for n in range(2, turns + 1)]
        assert result == keys
    # Written under one lease each: no worker gave a run up to its lease's expiry.
    relet = {run: fence for run, fence in fences.items() if fence[1] != {fence[0]}}
    lost = [line for line in worker.output().splitlines() if "lease" in line or "journal" in line]
    assert not relet, (relet, lost[-20:])
