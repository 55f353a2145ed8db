"""Every service: health, reflection, and a graceful SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from tests.fixtures.cluster import REPO_ROOT, Cluster, free_port, wait_until

# The shared cluster's worker; the tests on it only read, or send what must be refused.
MODULE = "tests.e2e.workflows"


def listed_services(address: str) -> set[str]:
    """What server reflection lists, as `grpcurl list` would show it."""
    with grpc.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        return {service.name for service in answer.list_services_response.service}


def test_reflection_lists_each_service(shared: Cluster) -> None:
    assert "perdure.api.workflow.v1.WorkflowService" in listed_services(shared.gateway)
    assert {
        "perdure.internal.history.v1.HistoryService",
        "perdure.api.worker.v1.JournalService",
    } <= listed_services(shared.address("history"))
    assert {
        "perdure.api.worker.v1.TaskService",
        "perdure.internal.scheduler.v1.SchedulerService",
    } <= listed_services(shared.address("scheduler"))
    for address in (shared.gateway, shared.address("history"), shared.address("scheduler")):
        assert "grpc.health.v1.Health" in listed_services(address)


def test_reflection_can_be_switched_off(start_cluster: Callable[..., Cluster]) -> None:
    cluster = start_cluster(PERDURE_REFLECTION="off")
    for address in (cluster.gateway, cluster.address("history"), cluster.address("scheduler")):
        with pytest.raises(grpc.RpcError) as caught:
            listed_services(address)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with cluster.client() as client:  # the services themselves still answer
        assert client.list().workflows == []


def test_services_stop_cleanly_on_sigterm(cluster: Cluster) -> None:
    for process in [p for p in cluster.processes if p.name in ("gateway", "history", "scheduler")]:
        process.signal(signal.SIGTERM)
        assert process.popen.wait(timeout=30) == 0, process.output()
        assert "stopped" in process.output()


def test_a_worker_stops_on_sigterm_even_while_the_scheduler_is_unreachable(
    cluster: Cluster,
) -> None:
    worker = cluster.start_worker("orphan")
    next(p for p in cluster.processes if p.name == "scheduler").kill()
    wait_until(lambda: "stream lost or refused" in worker.output(), 60, "the stream to break")
    worker.signal(signal.SIGTERM)
    assert worker.popen.wait(timeout=60) == 0, worker.output()
    assert "worker orphan stopped" in worker.output()


def test_a_worker_that_never_reached_a_scheduler_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "perdure.worker",
                "--module",
                "tests.e2e.workflows",
                "--scheduler",
                f"127.0.0.1:{free_port()}",
                "--identity",
                "lonely",
            ],
            cwd=REPO_ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "worker lonely starting" in log.read_text(), 60, "the worker to start")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert "worker lonely stopped" in log.read_text()


@pytest.mark.parametrize(
    ("hello", "field"),
    [
        (tpb.Hello(workflow_types=["t"], capacity=1), "hello.task_queue"),
        (tpb.Hello(task_queue="q", workflow_types=["t"], capacity=0), "hello.capacity"),
        (
            tpb.Hello(
                task_queue="q", workflow_types=["t"], capacity=1, timer_lookahead=timedelta(-1)
            ),
            "hello.timer_lookahead",
        ),
        (
            tpb.Hello(
                task_queue="q", workflow_types=["t"], capacity=1, timer_lookahead=timedelta(2)
            ),
            "hello.timer_lookahead",
        ),
    ],
    ids=["no-queue", "no-capacity", "negative-lookahead", "lookahead-too-long"],
)
def test_a_bad_hello_is_refused_naming_the_field(
    shared: Cluster, hello: tpb.Hello, field: str
) -> None:
    with grpc.insecure_channel(shared.address("scheduler")) as channel:
        stream = tgrpc.TaskServiceStub(channel).Connect(
            iter([tpb.ConnectRequest(hello=hello)]), timeout=30
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(stream)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (caught.value.details() or "")


def test_a_service_refuses_a_port_already_in_use(shared: Cluster) -> None:
    """Two servers never share a port silently (gRPC would, with SO_REUSEPORT)."""
    taken = shared.address("history")
    started = subprocess.run(
        [sys.executable, "-m", "perdure.scheduler", "--listen", taken],
        cwd=REPO_ROOT,
        env=shared.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert f"cannot listen on {taken} (is the port in use?)" in started.stderr
