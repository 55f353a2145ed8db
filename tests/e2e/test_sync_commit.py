"""A commit the synchronous standby never confirmed is never acknowledged.

The services run on a primary and a synchronous standby (tests/fixtures/replicated_postgres.py).
With the standby stopped (SIGSTOP), every commit waits for it; a cancelled wait leaves the
transaction committed on the primary alone, and PostgreSQL answers success with a WARNING. The
calls here are cancelled every way a deployment cancels one (pg_cancel_backend, a caller's
deadline), and retried while the standby is still stopped: none may report success, and
history reports itself not ready. Once the standby resumes, the retry is acknowledged. Then
the standby is stopped again and the primary killed (-9) while a signal's commit waits: that
caller gets UNAVAILABLE. The standby is promoted, the services find it, and the run finds
every acknowledged signal there, once, and completes with them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1.workflow_service_pb2_grpc import WorkflowServiceStub
from perdure.client import Client
from perdure.client._requests import signal_request
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.replicated_postgres import ReplicatedPostgres, replicated_pair

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RUN = "sync-commit-1"
SIGNALS = {"early": "sync-early", "go": "sync-go", "late": "sync-late"}
OPEN = ("WORKFLOW_STATUS_RUNNING", "WORKFLOW_STATUS_WAITING")
HISTORY = "perdure.internal.history.v1.HistoryService"
SERVING, NOT_SERVING = (
    health_pb2.HealthCheckResponse.SERVING,
    health_pb2.HealthCheckResponse.NOT_SERVING,
)


@pytest.fixture
def pair() -> Iterator[ReplicatedPostgres]:
    """A primary and a synchronous standby of this test's own."""
    with replicated_pair() as servers:
        yield servers


@pytest.fixture
def database_dsn(pair: ReplicatedPostgres) -> str:
    """The services' database: the multi-host URL of the pair (overrides the shared server)."""
    return pair.url()


def _signal(cluster: Cluster, name: str, timeout: float) -> str:
    """Send the run's signal `name` (its fixed id) once, on a plain stub (no client library
    retrying it): "accepted", "duplicate", or the status code and message."""
    request = signal_request("", RUN, name, f"{name}!", SIGNALS[name])
    with grpc.insecure_channel(cluster.gateway) as channel:
        try:
            reply = WorkflowServiceStub(channel).SignalWorkflow(request, timeout=timeout)
        except grpc.RpcError as error:
            return f"{error.code().name}: {error.details()}"
    return "accepted" if reply.accepted else "duplicate"


def _health(cluster: Cluster, service: str) -> int:
    with grpc.insecure_channel(cluster.address("history")) as channel:
        request = health_pb2.HealthCheckRequest(service=service)
        return int(health_pb2_grpc.HealthStub(channel).Check(request, timeout=5).status)


WAITING = "wait_event = 'SyncRep' AND application_name LIKE 'perdure-history%%'"


def _wait_for_standby(pair: ReplicatedPostgres) -> None:
    """Until a history backend's commit waits for the standby."""
    with psycopg.connect(pair.primary.dsn(), autocommit=True) as conn:
        wait_until(
            lambda: conn.execute(
                f"SELECT count(*) FROM pg_stat_activity WHERE {WAITING}"
            ).fetchone()[0],  # type: ignore[index]
            30,
            "a history backend waiting for the standby",
        )


def _cancel_waits_for_standby(pair: ReplicatedPostgres) -> int:
    """pg_cancel_backend of every history backend waiting for the standby, once there is one."""
    _wait_for_standby(pair)
    time.sleep(0.2)  # any other commit of the same call joins it
    with psycopg.connect(pair.primary.dsn(), autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM (SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
            f" WHERE {WAITING}) cancelled"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _run_state(cluster: Cluster, timeout: float) -> tuple[str, object]:
    """The run's status and result once it is closed, retrying calls the failover fails."""
    deadline = time.monotonic() + timeout
    with Client(cluster.gateway, timeout=5) as client:
        while True:
            try:
                described = client.describe(RUN)
                status = wf.WorkflowStatus.Name(described.workflow.status)
                if status not in OPEN:
                    return status, client.result(RUN)
            except grpc.RpcError as error:
                if time.monotonic() > deadline:
                    raise
                print(f"describe during the failover: {error.code().name}")
            assert time.monotonic() < deadline, "the run did not complete"
            time.sleep(0.2)


def test_a_commit_the_standby_did_not_confirm_is_never_acknowledged(
    cluster: Cluster, pair: ReplicatedPostgres
) -> None:
    cluster.start_worker("w1", module="tests.e2e.waiting_workflows")
    with cluster.client() as client:
        client.start_workflow("two_signals", workflow_id=RUN)
        # Idle, waiting for its signal: the signal's commit is then the one that waits.
        wait_until(
            lambda: client.describe(RUN).workflow.status == wf.WORKFLOW_STATUS_WAITING,
            60,
            "the run waiting for its signal",
        )

    pair.pause_standby()
    try:
        # A signal's commit waits for the standby; an operator's pg_cancel_backend ends the wait.
        with ThreadPoolExecutor(1) as calls:
            sent = calls.submit(_signal, cluster, "early", 30.0)
            assert _cancel_waits_for_standby(pair) >= 1
            cancelled = sent.result(timeout=60)
        assert cancelled.startswith("UNAVAILABLE"), cancelled
        assert "not confirmed by the synchronous standby" in cancelled
        # Retried while the standby is still stopped: it is on the primary, yet not reported.
        retried = _signal(cluster, "early", 3.0)
        assert retried.startswith("DEADLINE_EXCEEDED"), retried
        # A caller's deadline cancels another wait: that caller gives up, and is not told ok.
        given_up = _signal(cluster, "go", 2.0)
        assert given_up.startswith("DEADLINE_EXCEEDED"), given_up
        # Meanwhile history is not ready (it cannot confirm a commit), yet alive.
        wait_until(lambda: _health(cluster, HISTORY) == NOT_SERVING, 30, "history not ready")
        assert _health(cluster, "") == SERVING
    finally:
        pair.resume_standby()
    wait_until(lambda: _health(cluster, HISTORY) == SERVING, 30, "history ready again")

    # The standby confirms what waited: the signal is acknowledged now (received once).
    assert _signal(cluster, "early", 60.0) in ("accepted", "duplicate")

    # A commit waiting for the standby when the primary dies: the caller is not told ok.
    pair.pause_standby()
    try:
        with ThreadPoolExecutor(1) as calls:
            sent = calls.submit(_signal, cluster, "late", 30.0)
            _wait_for_standby(pair)
            pair.kill_primary()
            lost = sent.result(timeout=60)
        # No server takes writes now: history is not ready until one does.
        wait_until(lambda: _health(cluster, HISTORY) == NOT_SERVING, 30, "history not ready")
    finally:
        pair.promote()  # resumes the standby first
    assert lost.startswith("UNAVAILABLE"), lost
    wait_until(lambda: _health(cluster, HISTORY) == SERVING, 30, "history ready on the standby")

    # The promoted standby serves: "go" goes through once the services found it.
    deadline = time.monotonic() + 60
    while (sent_go := _signal(cluster, "go", 5.0)) not in ("accepted", "duplicate"):
        assert time.monotonic() < deadline, sent_go
        time.sleep(0.2)
    status, result = _run_state(cluster, 120.0)
    assert status == "WORKFLOW_STATUS_COMPLETED", status
    assert result == ["go!", "early!"]
    with psycopg.connect(pair.url(), autocommit=True) as conn:
        assert conn.info.port == pair.standby.port  # the promoted standby
        rows: dict[str, int] = dict(
            conn.execute(
                "SELECT signal_id, count(*) FROM history.events WHERE workflow_id = %s"
                " AND signal_id IS NOT NULL GROUP BY signal_id",
                [RUN],
            ).fetchall()
        )
    # "late" was never acknowledged: it may or may not have reached the standby.
    assert rows.pop(SIGNALS["late"], 0) <= 1
    assert rows == {SIGNALS["early"]: 1, SIGNALS["go"]: 1}
