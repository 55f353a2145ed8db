"""A local Perdure cluster for measuring: embedded PostgreSQL, the three services and worker
processes, on free ports, logging to files in a scratch directory."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from bench import cpu
from perdure.cli.dev_cmd import HTTP_OFFSET, free_base_port
from perdure.cli.keys_cmd import create_in_database
from perdure.common.embedded_db import start_embedded_postgres, stop_embedded_postgres
from perdure.common.health import wait_serving
from perdure.common.service_identity import SECRET_HEADER
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 60.0
SERVICES = ("scheduler", "history", "gateway")


@dataclass
class Cluster:
    """Services on free ports against one embedded database; workers come and go."""

    workdir: Path
    dsn: str = ""
    base_port: int = 0
    services: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_key: str = ""
    client_key: str = ""  # an operator's, for the bench's Client
    # The services' own credential, given to no worker.
    internal_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def gateway(self) -> str:
        """The gateway's address."""
        return f"127.0.0.1:{self.base_port}"

    def address(self, service: str) -> str:
        """A service's address."""
        return f"127.0.0.1:{self.base_port + ('gateway', 'history', 'scheduler').index(service)}"

    @property
    def http(self) -> str:
        """The gateway's HTTP/JSON port (as far above its gRPC port as `perdure dev`'s)."""
        return f"127.0.0.1:{self.base_port + HTTP_OFFSET}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PERDURE_DATABASE_URL": self.dsn,
            "PERDURE_HISTORY_ADDRESS": self.address("history"),
            "PERDURE_SCHEDULER_ADDRESS": self.address("scheduler"),
            # Measured as deployed, with API keys on; not throttled.
            "PERDURE_AUTH": "on",
            "PERDURE_RATE_LIMIT": "0",
            "PERDURE_GATEWAY_HTTP_LISTEN": self.http,
            "PERDURE_LOG_LEVEL": "WARNING",
            # The repository first (bench.workflows), then whatever the caller had.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }

    def _spawn(self, name: str, args: list[str], **env: str) -> subprocess.Popen[bytes]:
        with (self.workdir / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, *args],
                env={**self._env(), **env},
                cwd=REPO,
                stdout=log,
                stderr=log,
            )

    def start(self) -> None:
        """Start PostgreSQL and the services; return once all answer SERVING."""
        self.dsn = start_embedded_postgres(self.workdir / "db", keep_running=False)
        self.base_port = free_base_port()
        for service in SERVICES:
            process = self._spawn(
                service,
                ["-m", f"perdure.{service}", "--listen", self.address(service)],
                PERDURE_INTERNAL_SECRET=self.internal_secret,
            )
            self.services.append(process)
            wait_serving(
                self.address(service), STARTUP_TIMEOUT, still_running=process_running(process)
            )
            if service == "history":  # its migrations made the keys' table
                self.worker_key = create_in_database(self.dsn, "worker", ["*"], "bench workers")
                self.client_key = create_in_database(self.dsn, "operator", [], "bench client")

    def start_workers(self, count: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
        """Start `count` worker processes serving bench.workflows; return once all connected."""
        started = []
        for _ in range(count):
            number = len(self.workers)
            log = self.workdir / f"worker-{number}.log"
            args = ["-m", "perdure.worker", "--module", "bench.workflows", "--identity",
                    f"bench-{number}", "--concurrency", str(concurrency)]  # fmt: skip
            worker = self._spawn(f"worker-{number}", args, PERDURE_API_KEY=self.worker_key)
            # Workers log at WARNING here (the hot path stays quiet): ask the scheduler instead.
            self.workers.append(worker)
            started.append(worker)
            _wait_connected(self, worker, log)
        return started

    def stop_workers(self) -> None:
        """SIGTERM every worker and wait for it."""
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            worker.wait(timeout=60)
        self.workers.clear()

    def close(self) -> None:
        """Stop everything, the database last (now: its data directory is about to go)."""
        self.stop_workers()
        for process in reversed(self.services):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.services:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.dsn:
            stop_embedded_postgres(self.workdir / "db")

    def cpu(self) -> cpu.Sample:
        """CPU seconds spent so far by each part of the cluster (workers: those running)."""
        parts = {name: [process.pid] for name, process in zip(SERVICES, self.services, strict=True)}
        parts["workers"] = [worker.pid for worker in self.workers]
        pid_file = self.workdir / "db" / "pgdata" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0]) if pid_file.exists() else None
        return cpu.sample(parts, postmaster)


def process_running(process: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """A check that the process has not exited."""
    return lambda: process.poll() is None


def _wait_connected(cluster: Cluster, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the scheduler counts every running bench worker as connected."""
    expected = len([w for w in cluster.workers if w.poll() is None])
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with grpc.insecure_channel(cluster.address("scheduler")) as channel:
        stub = sgrpc.SchedulerServiceStub(channel)
        while True:
            if worker.poll() is not None:
                raise RuntimeError(f"a bench worker exited at start:\n{log.read_text()}")
            queue = stub.DescribeTaskQueue(
                spb.DescribeTaskQueueRequest(task_queue="default"),
                # An internal call: the harness holds the services' credential.
                metadata=((SECRET_HEADER, cluster.internal_secret),),
            )
            if queue.connected_workers >= expected:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("bench workers did not connect")
            time.sleep(0.05)
