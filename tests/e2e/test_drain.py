"""Graceful drain: a scheduler replica and a worker get SIGTERM in the middle of work. Leases
outlast the test (PERDURE_LEASE_TTL=600), so only the handover of the worker's session and the
hand-back of its workflows can move the work on, never a lease expiry; and no step runs twice."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from grpc_health.v1 import health_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf
from tests.e2e.blocking import WAIT, runs_per_step, start_blocked, started
from tests.fixtures.cluster import Cluster, free_port, wait_until
from tests.fixtures.rpc import health_of

RUNS = 6
EACH_STEP_ONCE = Counter({"step_1": 1, "step_2": 1, "step_3": 1, "step_4": 1})


def step_pid(ledger: Path, step: str) -> str:
    """The pid that finished a step, from the ledger."""
    [pid] = [line.split()[1] for line in ledger.read_text().splitlines() if line.split()[0] == step]
    return pid


def test_a_scheduler_and_a_worker_stopped_mid_work_hand_it_over(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(replicas={"scheduler": 2}, PERDURE_LEASE_TTL="600")
    gate = tmp_path / "gate"
    ledgers = {f"drain-{number}": tmp_path / f"ledger-{number}" for number in range(RUNS)}
    health = f"127.0.0.1:{free_port()}"
    first = cluster.start_worker("first", PERDURE_WORKER_HEALTH_LISTEN=health)
    with cluster.client() as client:
        for workflow_id, ledger in ledgers.items():
            start_blocked(client, workflow_id, ledger, gate)  # the first worker holds them all

        # The scheduler replica holding the worker's session stops: the session moves to the
        # other replica, its leases with it.
        schedulers = [p for p in cluster.processes if p.name == "scheduler"]
        [holder] = [p for p in schedulers if "worker first connected" in p.output()]
        holder.signal(signal.SIGTERM)
        assert holder.popen.wait(timeout=30) == 0, holder.output()
        wait_until(
            lambda: first.output().count("worker first connected:") == 2,
            WAIT,
            "the worker's session to move",
        )
        assert "moving to another scheduler replica" in first.output()

        # The worker stops: the steps under way finish, each workflow is handed back before its
        # next step, and the other worker takes it over at once.
        second = cluster.start_worker("second")
        first.signal(signal.SIGTERM)
        wait_until(lambda: "draining" in first.output(), WAIT, "the worker to start draining")
        assert health_of(health) == health_pb2.HealthCheckResponse.NOT_SERVING
        gate.touch()
        assert first.popen.wait(timeout=60) == 0, first.output()
        results = {workflow_id: client.wait(workflow_id, timeout=WAIT) for workflow_id in ledgers}

    for workflow_id, ledger in ledgers.items():
        assert results[workflow_id].workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        assert runs_per_step(ledger) == EACH_STEP_ONCE, ledger.read_text()
        assert started(ledger, "step_3") == [str(first.popen.pid)]
        assert step_pid(ledger, "step_3") == str(first.popen.pid)
        assert step_pid(ledger, "step_4") == str(second.popen.pid)
    assert first.output().count("handed back before 'step_4'") == RUNS
    assert "worker first stopped" in first.output()
    for scheduler in schedulers:
        assert "expired" not in scheduler.output()
