"""Every service: health, reflection, and a graceful SIGTERM."""

from __future__ import annotations

import signal
from pathlib import Path

import grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from tests.e2e.blocking import start_blocked
from tests.fixtures.cluster import Cluster, wait_until


def listed_services(address: str) -> set[str]:
    """What server reflection lists, as `grpcurl list` would show it."""
    with grpc.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        return {service.name for service in answer.list_services_response.service}


def test_reflection_lists_each_service(cluster: Cluster) -> None:
    assert "perdure.api.workflow.v1.WorkflowService" in listed_services(cluster.gateway)
    assert {
        "perdure.internal.history.v1.HistoryService",
        "perdure.api.worker.v1.JournalService",
    } <= listed_services(cluster.address("history"))
    assert {
        "perdure.api.worker.v1.TaskService",
        "perdure.internal.scheduler.v1.SchedulerService",
    } <= listed_services(cluster.address("scheduler"))
    for address in (cluster.gateway, cluster.address("history"), cluster.address("scheduler")):
        assert "grpc.health.v1.Health" in listed_services(address)


def test_sigterm_lets_a_worker_finish_what_it_holds(cluster: Cluster, tmp_path: Path) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    worker = cluster.start_worker("draining")
    with cluster.client() as client:
        start_blocked(client, "drain-1", ledger, gate)
        worker.signal(signal.SIGTERM)
        wait_until(lambda: "draining" in worker.output(), 30, "the worker to start draining")
        gate.touch()
        assert worker.popen.wait(timeout=60) == 0
        described = client.describe("drain-1")
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert "worker draining stopped" in worker.output()


def test_services_stop_cleanly_on_sigterm(cluster: Cluster) -> None:
    for process in [p for p in cluster.processes if p.name in ("gateway", "history", "scheduler")]:
        process.signal(signal.SIGTERM)
        assert process.popen.wait(timeout=30) == 0, process.output()
        assert "stopped" in process.output()
