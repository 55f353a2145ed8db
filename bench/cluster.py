"""A local Perdure cluster for measuring: embedded PostgreSQL, the three services and worker
processes, on free ports, logging to files in a scratch directory. With `cells` above 1, each
further cell is a database of its own in the same server with its own history and scheduler
(as `perdure dev --cells`), behind the one gateway, the workers serving every cell."""

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
import psycopg
from psycopg import sql

from bench import cpu
from perdure.cli.dev_cmd import CELL_NAMES, HTTP_OFFSET, copy_keys, free_base_port
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
class Cell:
    """One cell beyond the first: its database and its history's and scheduler's ports."""

    name: str
    dsn: str
    ports: dict[str, int]

    def address(self, service: str) -> str:
        return f"127.0.0.1:{self.ports[service]}"


@dataclass
class Cluster:
    """Services on free ports against one embedded database; workers come and go."""

    workdir: Path
    cells: int = 1
    dsn: str = ""
    more_cells: list[Cell] = field(default_factory=list)  # beyond the first
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

    @property
    def dsns(self) -> list[str]:
        """Every cell's database (the first cell's is `dsn`)."""
        return [self.dsn, *(cell.dsn for cell in self.more_cells)]

    def cells_spelled(self) -> str:
        """PERDURE_CELLS of this cluster ("" with one cell)."""
        if not self.more_cells:
            return ""
        first = f"a={self.address('history')}/{self.address('scheduler')}"
        more = (
            f"{c.name}={c.address('history')}/{c.address('scheduler')}" for c in self.more_cells
        )
        return ";".join([first, *more])

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
            **({"PERDURE_CELLS": self.cells_spelled()} if self.more_cells else {}),
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
        for index in range(1, self.cells):
            name = CELL_NAMES[index]
            ports = dict(zip(("history", "scheduler"), free_ports(2), strict=True))
            self.more_cells.append(Cell(name, _database(self.dsn, f"bench_cell_{name}"), ports))
        for service in SERVICES:
            if service == "gateway" and self.more_cells:
                self._start_more_cells()
            process = self._spawn(
                service,
                ["-m", f"perdure.{service}", "--listen", self.address(service)],
                PERDURE_INTERNAL_SECRET=self.internal_secret,
                **self._gateway_env(service),
            )
            self.services.append(process)
            wait_serving(
                self.address(service), STARTUP_TIMEOUT, still_running=process_running(process)
            )
            if service == "history":  # its migrations made the keys' table
                self.worker_key = create_in_database(self.dsn, "worker", ["*"], "bench workers")
                self.client_key = create_in_database(self.dsn, "operator", [], "bench client")

    def _start_more_cells(self) -> None:
        """The other cells' scheduler and history, with the first cell's keys."""
        for cell in self.more_cells:
            for service in ("scheduler", "history"):
                process = self._spawn(
                    f"{service}-{cell.name}",
                    ["-m", f"perdure.{service}", "--listen", cell.address(service)],
                    PERDURE_INTERNAL_SECRET=self.internal_secret,
                    PERDURE_DATABASE_URL=cell.dsn,
                    # Its own: history's relay enqueues in its cell's scheduler.
                    PERDURE_HISTORY_ADDRESS=cell.address("history"),
                    PERDURE_SCHEDULER_ADDRESS=cell.address("scheduler"),
                )
                self.services.append(process)
                wait_serving(
                    cell.address(service), STARTUP_TIMEOUT, still_running=process_running(process)
                )
        copy_keys(self.dsn, [cell.dsn for cell in self.more_cells])

    def _gateway_env(self, service: str) -> dict[str, str]:
        """The gateway's directory, with several cells."""
        if service != "gateway" or not self.more_cells:
            return {}
        return {"PERDURE_DIRECTORY_DATABASE_URL": _database(self.dsn, "bench_directory")}

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
        # Each service's processes, every cell's together.
        parts: dict[str, list[int]] = {name: [] for name in SERVICES}
        for process in self.services:
            name = str(process.args[2]).removeprefix("perdure.")  # type: ignore[index]
            parts[name].append(process.pid)
        parts["workers"] = [worker.pid for worker in self.workers]
        pid_file = self.workdir / "db" / "pgdata" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0]) if pid_file.exists() else None
        return cpu.sample(parts, postmaster)


def free_ports(count: int) -> list[int]:
    """`count` ports free now (the other cells' services)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_base_port()
        if port not in ports:
            ports.append(port)
    return ports


def _database(dsn: str, name: str) -> str:
    """A new database of the server of `dsn` (the scratch server is new for every run)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(dsn, dbname=name)


def process_running(process: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """A check that the process has not exited."""
    return lambda: process.poll() is None


def _wait_connected(cluster: Cluster, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the scheduler counts every running bench worker as connected."""
    schedulers = [
        cluster.address("scheduler"),
        *(c.address("scheduler") for c in cluster.more_cells),
    ]
    for scheduler in schedulers:  # every cell's session
        _wait_connected_to(cluster, scheduler, worker, log)


def _wait_connected_to(
    cluster: Cluster, scheduler: str, worker: subprocess.Popen[bytes], log: Path
) -> None:
    expected = len([w for w in cluster.workers if w.poll() is None])
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with grpc.insecure_channel(scheduler) as channel:
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
