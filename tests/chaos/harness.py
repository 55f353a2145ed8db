"""The cluster under fire: PostgreSQL, two gateways, two history and two scheduler replicas and
three workers as real processes, every connection between them through the harness's proxy."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psycopg

from perdure.common.embedded_db import stop_embedded_postgres
from tests.chaos.proxy import Fault, Link, Proxy
from tests.chaos.workflows import LEDGER_DSN_VARIABLE, SCHEMA
from tests.fixtures.cluster import (
    Process,
    free_ports,
    spawn,
    wait_connected,
    wait_healthy,
    worker_args,
)

GATEWAYS, HISTORIES, SCHEDULERS = ("g1", "g2"), ("h1", "h2"), ("s1", "s2")
WORKERS = ("w1", "w2", "w3")
KINDS = {"g": "gateway", "h": "history", "s": "scheduler", "w": "worker"}
WORKER_MODULE = "tests.chaos.workflows"
STOP_TIMEOUT = 60.0
_START_DATABASE = (
    "import sys; from perdure.common.embedded_db import start_embedded_postgres as start; "
    "print(start(sys.argv[1], keep_running=True))"
)


def kind_of(name: str) -> str:
    """gateway, history, scheduler, worker, client or database, from a member's name."""
    return KINDS.get(name[0], name)


@dataclass
class Member:
    """A process slot: the same command and environment on every (re)start."""

    name: str
    args: list[str]
    env: dict[str, str]
    listen: str | None = None  # host:port for services, which answer health checks
    runs: list[Process] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """Which service (or worker) this is."""
        return kind_of(self.name)

    @property
    def current(self) -> Process:
        """The latest process."""
        return self.runs[-1]

    def alive(self) -> bool:
        """Whether the latest process is running (paused counts as running)."""
        return bool(self.runs) and self.current.popen.poll() is None

    def output(self) -> str:
        """The logs of every run, oldest first."""
        return "".join(run.output() for run in self.runs)


class ChaosCluster:
    """Starts, breaks and heals the cluster; the faults are methods, the proxy holds links."""

    def __init__(self, workdir: Path, seed: int, lease_ttl: float = 4.0) -> None:
        self.workdir = workdir
        self.proxy = Proxy(seed)
        self.lease_ttl = lease_ttl
        self.members: dict[str, Member] = {}
        self.paused: set[str] = set()
        self.database_up = False
        self.dsn = ""
        self.gateways: list[str] = []  # the client's addresses of the gateways (via the proxy)
        names = (*GATEWAYS, *HISTORIES, *SCHEDULERS)
        self._ports = dict(zip(names, free_ports(len(names)), strict=True))

    # --- start and stop ----------------------------------------------------------------------

    def start(self) -> None:
        """Database, ledger schema, links, services, then workers; return when all are up."""
        self.start_database()
        with self.connect() as conn:
            conn.execute(SCHEMA)
        socket = self._socket_path()
        for name in (*HISTORIES, *SCHEDULERS, *GATEWAYS):
            kind = kind_of(name)
            env = {}
            if kind in ("history", "scheduler"):
                env[f"PERDURE_{kind.upper()}_DATABASE_URL"] = self._database_through(name, socket)
            if kind in ("history", "gateway"):
                env["PERDURE_SCHEDULER_ADDRESS"] = self._through(name, SCHEDULERS)
            if kind == "gateway":
                env["PERDURE_HISTORY_ADDRESS"] = self._through(name, HISTORIES)
            listen = f"127.0.0.1:{self._ports[name]}"
            args = ["-m", f"perdure.{kind}", "--listen", listen]
            self.members[name] = Member(name, args, self._env(env), listen)
        self.gateways = [
            f"127.0.0.1:{self.proxy.link('client', name, ('127.0.0.1', self._ports[name])).port}"
            for name in GATEWAYS
        ]
        for name in WORKERS:
            env = {
                "PERDURE_SCHEDULER_ADDRESS": self._through(name, SCHEDULERS),
                "PERDURE_HISTORY_ADDRESS": self._through(name, HISTORIES),
                LEDGER_DSN_VARIABLE: self.dsn,
            }
            args = worker_args(name, WORKER_MODULE, concurrency=10, task_queue="default")
            self.members[name] = Member(name, args, self._env(env))
        services = [m for m in self.members.values() if m.listen]
        for member in services:
            self._spawn(member)
        for member in services:
            self._wait_up(member)
        for name in WORKERS:
            self._spawn(self.members[name])
        for name in WORKERS:
            self._wait_up(self.members[name])

    def close(self) -> None:
        """Kill every process, stop the database and the proxy."""
        for name in self.members:
            self.kill(name)
        if self.database_up:
            stop_embedded_postgres(self.workdir / "pg")
        self.proxy.close()

    # --- wiring ------------------------------------------------------------------------------

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        return {
            **os.environ,
            # A local harness: no API keys (the services warn about it).
            "PERDURE_AUTH": "off",
            "PERDURE_RATE_LIMIT": "0",  # measured and stressed flat out, not throttled
            "PERDURE_GATEWAY_HTTP_LISTEN": "off",  # driven over gRPC
            "PERDURE_LOG_LEVEL": "INFO",
            "PERDURE_LEASE_TTL": f"{self.lease_ttl:g}",
            # Worker sessions move between scheduler replicas every few seconds, faults or not.
            "PERDURE_SESSION_MAX_AGE": "3",
            # Stranded runs (a scheduler database reset) are found and made due again quickly.
            "PERDURE_STUCK_AFTER": "3",
            "PYTHONUNBUFFERED": "1",
            **extra,
        }

    def _through(self, source: str, targets: tuple[str, ...]) -> str:
        """A gRPC target naming one link per replica, the source's own preference first."""
        ports = [
            self.proxy.link(source, target, ("127.0.0.1", self._ports[target])).port
            for target in targets
        ]
        preferred = (int(source[1]) - 1) % len(ports)
        ordered = ports[preferred:] + ports[:preferred]
        return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ordered)

    def _database_through(self, source: str, socket: str) -> str:
        link = self.proxy.link(source, "database", socket)
        return f"postgresql://postgres@127.0.0.1:{link.port}/postgres?connect_timeout=5"

    def _socket_path(self) -> str:
        params = psycopg.conninfo.conninfo_to_dict(self.dsn)
        return f"{params['host']}/.s.PGSQL.{params.get('port') or 5432}"

    def _spawn(self, member: Member) -> None:
        log = self.workdir / f"{member.name}-{len(member.runs)}.log"
        member.runs.append(spawn(member.name, member.args, member.env, log))

    def _wait_up(self, member: Member) -> None:
        if member.listen:
            wait_healthy(member.listen, member.current.popen, member.current.log)
        else:
            wait_connected(member.current)

    # --- faults ------------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """kill -9 (a paused process too)."""
        self.paused.discard(name)
        if self.members[name].alive():
            self.members[name].current.kill()

    def restart(self, name: str) -> None:
        """Start a process that is not running again; return once it serves (or connects)."""
        member = self.members[name]
        if not member.alive():
            self._spawn(member)
            self._wait_up(member)

    def pause(self, name: str) -> None:
        """SIGSTOP: alive, holding its connections and leases, doing nothing."""
        self.members[name].current.signal(signal.SIGSTOP)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        """SIGCONT."""
        self.members[name].current.signal(signal.SIGCONT)
        self.paused.discard(name)

    def terminate(self, name: str) -> int:
        """SIGTERM, then wait for the process to drain and exit; return its exit code."""
        process = self.members[name].current
        process.signal(signal.SIGTERM)
        return process.popen.wait(timeout=STOP_TIMEOUT)

    def stop_database(self) -> None:
        """PostgreSQL stops as if it crashed (-m immediate)."""
        stop_embedded_postgres(self.workdir / "pg", mode="immediate")
        self.database_up = False

    def start_database(self) -> None:
        """Start (or restart, recovering from the WAL) the embedded PostgreSQL."""
        started = subprocess.run(
            [sys.executable, "-c", _START_DATABASE, str(self.workdir / "pg")],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        self.dsn = started.stdout.strip().splitlines()[-1]
        self.database_up = True

    def links(self, source_kind: str, target_kind: str, source: str | None = None) -> list[Link]:
        """The links from processes of one kind (or one process) to those of another."""
        return self.proxy.select(
            lambda link: (
                kind_of(link.source) == source_kind
                and kind_of(link.target) == target_kind
                and (source is None or link.source == source)
            )
        )

    @contextmanager
    def faulted(self, links: list[Link], fault: Fault) -> Iterator[None]:
        """Apply `fault` to `links` for the duration of the block."""
        self.proxy.apply(links, fault)
        try:
            yield
        finally:
            self.proxy.apply(links, Fault())

    def heal(self) -> None:
        """Everything back: links pass, paused processes resume, the dead start again."""
        self.proxy.heal()
        for name in list(self.paused):
            self.resume(name)
        if not self.database_up:
            self.start_database()
        for name in self.members:
            self.restart(name)

    # --- reading -----------------------------------------------------------------------------

    def connect(self) -> psycopg.Connection:
        """A direct connection to the database (not through the proxy)."""
        return psycopg.connect(self.dsn, autocommit=True)

    def logs(self, kind: str) -> str:
        """Everything the processes of one kind logged."""
        return "".join(m.output() for m in self.members.values() if m.kind == kind)


Cluster = TypeVar("Cluster", bound=ChaosCluster)


@contextmanager
def started(make: Callable[[Path], Cluster], prefix: str) -> Iterator[Cluster]:
    """A cluster made by `make` in a directory of its own, not under pytest's base temp, which
    another pytest session on the machine may delete (pytest keeps only the last three) while
    the database runs in it; closed after. PERDURE_KEEP_CHAOS_DIR=1 keeps the directory:
    every process's log and the database's."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = make(workdir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        if not os.environ.get("PERDURE_KEEP_CHAOS_DIR"):
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"cluster directory kept: {workdir}")
