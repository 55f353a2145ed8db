"""Mutual TLS between real processes: `perdure certs dev`, then a cluster, a worker and a client
each with its own certificate; refusals, the plaintext health port, reload and misconfiguration."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
import requests
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1.workflow_service_pb2 import ListWorkflowsRequest
from perdure.api.workflow.v1.workflow_service_pb2_grpc import WorkflowServiceStub
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import REPO_ROOT, SERVICES, Cluster, free_port, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.tls import FRESH, certs_dev, make_certs, tls_channel

SERVING = health_pb2.HealthCheckResponse.SERVING


def check(channel: grpc.Channel) -> grpc.StatusCode | int:
    """The health status the server reports, or the status code of the failed call."""
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        except grpc.RpcError as error:
            return error.code()
        status: int = reply.status
        return status


def https(cluster: Cluster, certs: Path, role: str | None = None) -> int | str:
    """The status of GET /openapi.json on the gateway's HTTPS port, trusting `certs`' CA and
    presenting `role`'s certificate (none when None); the error's name if TLS refused it."""
    cert = None if role is None else (str(certs / f"{role}.pem"), str(certs / f"{role}-key.pem"))
    try:
        with requests.Session() as session:  # a connection of its own
            answer = session.get(
                f"https://{cluster.http_address}/openapi.json",
                verify=str(certs / "ca.pem"),
                cert=cert,
                timeout=10,
            )
    except requests.exceptions.SSLError:
        return "SSLError"
    except requests.exceptions.ConnectionError:  # the server cut the handshake
        return "ConnectionError"
    return answer.status_code


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return make_certs(tmp_path / "certs")


@pytest.fixture
def other_ca(tmp_path: Path) -> Path:
    """Certificates of another CA, which no process of the cluster trusts."""
    return make_certs(tmp_path / "other")


def use_client_cert(monkeypatch: pytest.MonkeyPatch, certs: Path) -> None:
    """This test process (its perdure.client.Client) presents the `client` certificate."""
    monkeypatch.setenv("PERDURE_TLS_CA", str(certs / "ca.pem"))
    monkeypatch.setenv("PERDURE_TLS_CERT", str(certs / "client.pem"))
    monkeypatch.setenv("PERDURE_TLS_KEY", str(certs / "client-key.pem"))


def test_a_workflow_runs_with_mtls_everywhere(
    start_cluster: Callable[..., Cluster],
    certs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = start_cluster(certs=certs)
    cluster.start_worker("tls")
    use_client_cert(monkeypatch, certs)
    with cluster.client() as client:
        client.start_workflow(
            "five_steps", {"ledger": str(tmp_path / "ledger")}, workflow_id="tls-1"
        )
        described = client.wait("tls-1")
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result)["total"] == 150
    for process in cluster.processes[:3]:
        assert " (TLS)" in process.output(), process.output()
    # The gateway asks for no client certificate by default: a caller trusting the CA is
    # enough there, and only there.
    assert check(tls_channel(cluster.gateway, certs)) == SERVING
    for service in ("history", "scheduler"):
        assert check(tls_channel(cluster.address(service), certs)) == grpc.StatusCode.UNAVAILABLE
    assert https(cluster, certs) == 200  # the HTTP port is HTTPS, with the same certificate


def test_only_clients_with_a_certificate_from_the_ca_get_through(
    start_cluster: Callable[..., Cluster], certs: Path, other_ca: Path
) -> None:
    cluster = start_cluster(certs=certs, PERDURE_GATEWAY_CLIENT_CERT="require")
    for service in SERVICES:
        address = cluster.address(service)
        assert check(tls_channel(address, certs, "client")) == SERVING, service
        refused = {
            "no certificate": tls_channel(address, certs),
            "another CA's certificate": grpc.secure_channel(
                address,
                grpc.ssl_channel_credentials(
                    (certs / "ca.pem").read_bytes(),
                    (other_ca / "client-key.pem").read_bytes(),
                    (other_ca / "client.pem").read_bytes(),
                ),
                options=FRESH,
            ),
            "a server certificate it does not trust": tls_channel(address, other_ca, "client"),
            "plaintext": grpc.insecure_channel(address, options=FRESH),
        }
        for what, channel in refused.items():
            assert check(channel) == grpc.StatusCode.UNAVAILABLE, (service, what)
        health = grpc.insecure_channel(cluster.health_address(service), options=FRESH)
        assert check(health) == SERVING, service
    # The gateway's HTTPS port asks for a client certificate of the CA just as its gRPC port.
    assert https(cluster, certs, "client") == 200
    assert https(cluster, certs) in ("SSLError", "ConnectionError")
    assert https(cluster, other_ca, "client") == "SSLError"


def test_the_health_port_serves_health_only_and_reports_the_shutdown(
    start_cluster: Callable[..., Cluster], certs: Path
) -> None:
    cluster = start_cluster(certs=certs)
    with grpc.insecure_channel(cluster.health_address("gateway")) as channel:
        with pytest.raises(grpc.RpcError) as caught:  # the API is on the TLS port only
            WorkflowServiceStub(channel).ListWorkflows(ListWorkflowsRequest(), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(), timeout=30
        )
        assert next(watch).status == SERVING
        gateway = next(p for p in cluster.processes if p.name == "gateway")
        gateway.signal(signal.SIGTERM)
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert gateway.popen.wait(timeout=30) == 0


def test_new_connections_get_a_replaced_certificate_without_a_restart(
    start_cluster: Callable[..., Cluster], certs: Path, other_ca: Path
) -> None:
    cluster = start_cluster(certs=certs)
    assert check(tls_channel(cluster.gateway, certs)) == SERVING
    assert check(tls_channel(cluster.gateway, other_ca)) == grpc.StatusCode.UNAVAILABLE
    for suffix in (".pem", "-key.pem"):  # as a rotation would: write aside, then rename
        aside = certs / f"gateway{suffix}.new"
        shutil.copyfile(other_ca / f"gateway{suffix}", aside)
        os.replace(aside, certs / f"gateway{suffix}")
    assert check(tls_channel(cluster.gateway, other_ca)) == SERVING
    assert check(tls_channel(cluster.gateway, certs)) == grpc.StatusCode.UNAVAILABLE
    # The HTTPS port looks at the files every few seconds.
    wait_until(lambda: https(cluster, other_ca) == 200, 30, "HTTPS to serve the new certificate")
    assert https(cluster, certs) == "SSLError"
    gateway = next(p for p in cluster.processes if p.name == "gateway")
    assert gateway.popen.poll() is None
    assert "certificate files changed" in gateway.output()


def start_misconfigured(module: str, env: dict[str, str], *args: str) -> str:
    """Run `python -m MODULE ARGS...` with `env`; it must exit non-zero: return its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stderr


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"PERDURE_TLS_CERT": "{certs}/gateway.pem"},
            "gateway: PERDURE_TLS_CERT is set ({certs}/gateway.pem) but PERDURE_TLS_KEY is not",
        ),
        (
            {"PERDURE_TLS_KEY": "{certs}/gateway-key.pem"},
            "gateway: PERDURE_TLS_KEY is set ({certs}/gateway-key.pem) but PERDURE_TLS_CERT is not",
        ),
        (
            {"PERDURE_TLS_CERT": "{certs}/gateway.pem", "PERDURE_TLS_KEY": "{certs}/missing.pem"},
            "gateway: PERDURE_TLS_KEY={certs}/missing.pem: cannot read it (No such file",
        ),
        (
            {
                "PERDURE_TLS_CERT": "{certs}/gateway.pem",
                "PERDURE_TLS_KEY": "{certs}/gateway-key.pem",
                "PERDURE_GATEWAY_CLIENT_CERT": "require",
            },
            "gateway: PERDURE_TLS_CERT is set ({certs}/gateway.pem) but PERDURE_TLS_CA is not",
        ),
        (
            {"PERDURE_GATEWAY_CLIENT_CERT": "sometimes"},
            "PERDURE_GATEWAY_CLIENT_CERT must be require or optional, not 'sometimes'",
        ),
    ],
)
def test_a_half_configured_gateway_stops_at_start_and_says_why(
    certs: Path, variables: dict[str, str], message: str
) -> None:
    env = {name: value.format(certs=certs) for name, value in variables.items()}
    stderr = start_misconfigured("perdure.gateway", env, "--listen", f"127.0.0.1:{free_port()}")
    assert message.format(certs=certs) in stderr


def test_history_and_scheduler_always_need_the_ca(database_dsn: str, certs: Path) -> None:
    for service in ("history", "scheduler"):
        env = {
            "PERDURE_DATABASE_URL": database_dsn,
            "PERDURE_TLS_CERT": str(certs / f"{service}.pem"),
            "PERDURE_TLS_KEY": str(certs / f"{service}-key.pem"),
        }
        stderr = start_misconfigured(
            f"perdure.{service}", env, "--listen", f"127.0.0.1:{free_port()}"
        )
        assert f"{service}: PERDURE_TLS_CERT is set" in stderr
        assert "PERDURE_TLS_CA is not" in stderr


def test_a_worker_with_an_unreadable_certificate_stops_and_says_which(certs: Path) -> None:
    env = {
        "PERDURE_TLS_CA": str(certs / "ca.pem"),
        "PERDURE_TLS_CERT": str(certs / "nowhere.pem"),
        "PERDURE_TLS_KEY": str(certs / "worker-key.pem"),
        "PERDURE_SCHEDULER_ADDRESS": f"127.0.0.1:{free_port()}",
        "PERDURE_HISTORY_ADDRESS": f"127.0.0.1:{free_port()}",
    }
    stderr = start_misconfigured("perdure.worker", env, "--module", "tests.e2e.workflows")
    assert f"PERDURE_TLS_CERT={certs / 'nowhere.pem'}: cannot read it" in stderr


def test_certs_dev_keeps_existing_files_unless_forced(certs: Path) -> None:
    ca = (certs / "ca.pem").read_bytes()
    refused = certs_dev(certs)
    assert refused.returncode == 1
    assert "already holds ca.pem" in refused.stderr
    assert "--force" in refused.stderr
    assert (certs / "ca.pem").read_bytes() == ca
    forced = certs_dev(certs, "--force", "--host", "perdure.internal")
    assert forced.returncode == 0, forced.stderr
    assert (certs / "ca.pem").read_bytes() != ca


def test_python_and_node_workers_with_keys_over_mtls(
    start_cluster: Callable[..., Cluster],
    certs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Everything on at once: mTLS between every process and API keys on every call, in a
    namespace of their own, a Python workflow calling a step a Node.js worker executes on a
    queue of that namespace."""
    cluster = start_cluster(certs=certs, PERDURE_AUTH="on")
    cluster.start_worker(
        "py-runner",
        "tests.e2e.remote_workflows",
        task_queue="runs",
        PERDURE_API_KEY=make_key(cluster, "acme", "worker", "runs"),
    )
    cluster.start_node_worker(
        "node-tools",
        "node-tools",
        tmp_path / "ledger",
        PERDURE_API_KEY=make_key(cluster, "acme", "worker", "node-tools"),
    )
    use_client_cert(monkeypatch, certs)
    with Client(cluster.gateway, api_key=make_key(cluster, "acme", "operator")) as client:
        client.start_workflow(
            "calls_remote",
            {"step": "notify", "input": {"message": "sealed"}, "queue": "node-tools"},
            workflow_id="mtls-1",
            task_queue="runs",
        )
        described = client.wait("mtls-1", timeout=90)
    assert described.workflow.namespace == "acme"
    remote = from_payload(described.workflow.result)["remote"]
    assert remote["by"] == "node" and remote["message"] == "sealed"
