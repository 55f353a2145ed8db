"""`perdure dev`: the embedded database, the three services and an example worker, locally;
with `--cells N`, N cells (a database each, in the one embedded server, with its own history
and scheduler) behind one gateway, and the worker serving them all."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ipaddress
import os
import random
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import AsyncConnection, sql

from perdure.cli.flags import DEV_KEY_FILE
from perdure.cli.keys_cmd import create_in_database
from perdure.common.embedded_db import DEFAULT_DATA_DIR, start_embedded_postgres
from perdure.common.errors import ApiError
from perdure.common.flags import DEFAULT_PORTS, GATEWAY_HTTP_PORT
from perdure.common.health import wait_serving
from perdure.history import keys

SERVICES = ("gateway", "history", "scheduler")  # their ports: base, base + 1, base + 2
# The gateway's HTTP API and web UI: as far above the gateway's port as by default (7480).
HTTP_OFFSET = GATEWAY_HTTP_PORT - DEFAULT_PORTS["gateway"]
STARTUP_TIMEOUT = 60.0
MAX_RESTARTS = 10  # of a service; the worker is restarted for as long as it takes
# What the example worker serves unless --worker-module says: the examples' agents.
EXAMPLE_MODULES = ("examples.research_agent", "examples.purchasing_agent")
# A worker that exits is started again after a delay doubling from the first to the longest
# while it keeps exiting; one that ran this long before exiting counts as healthy again.
RESTART_DELAY = (0.5, 30.0)
HEALTHY_AFTER = 60.0
PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>
MAX_CELLS = 7  # cell i's ports are base + 10*i + 1 and + 2, below the HTTP port (base + 80)
CELL_NAMES = "abcdefg"
LOOPBACK = "127.0.0.1"
# The credential the services prove themselves to each other with: theirs alone, never a
# worker's (a worker holding it could call history's and the scheduler's internal services).
INTERNAL_SECRET = "PERDURE_INTERNAL_SECRET"
SERVICE_ONLY = (
    INTERNAL_SECRET,
    "PERDURE_INTERNAL_SECRET_ACCEPTED",
    "PERDURE_DATABASE_URL",
    *(f"PERDURE_{s.upper()}_DATABASE_URL" for s in SERVICES),
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `dev`."""
    parser = subparsers.add_parser("dev", help="run a local cluster with an example worker")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("PERDURE_DATA_DIR", DEFAULT_DATA_DIR),
        help="where the embedded PostgreSQL keeps its data (default ./.perdure/)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=7400,
        help="gateway port; history and scheduler take the next two, the HTTP API and web UI "
        "the port 80 above (default 7400: 7401, 7402, 7480)",
    )
    parser.add_argument(
        "--bind",
        metavar="HOST",
        default=os.environ.get("PERDURE_DEV_BIND", LOOPBACK),
        help="address every port (gateway, history, scheduler, HTTP API and web UI) listens on "
        f"(PERDURE_DEV_BIND, default {LOOPBACK}: this machine only); 0.0.0.0 lets other "
        "machines in, with API keys and the internal secret of the run checked; refused with "
        "--insecure",
    )
    parser.add_argument(
        "--otlp",
        metavar="ENDPOINT",
        default=None,
        help="send every process's traces and metrics to this OTLP collector (for example "
        "http://localhost:4317; OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf for port 4318)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="run with no API keys at all (PERDURE_AUTH=off): anyone who reaches a port can do "
        "anything; for a laptop only, so the ports stay on loopback",
    )
    parser.add_argument(
        "--cells",
        type=int,
        default=1,
        metavar="N",
        help=f"run N cells (1 to {MAX_CELLS}; default 1): databases of their own in the embedded "
        "server, each with its history and scheduler (cell i's on the base port + 10*i + 1 and "
        "+ 2), one gateway placing runs among them, the worker serving every one",
    )
    parser.add_argument(
        "--worker-module",
        action="append",
        help="module whose workflows and steps the example worker serves (repeatable; default "
        f"{' and '.join(EXAMPLE_MODULES)})",
    )


def cli_environment(data_dir: Path) -> str:
    """What a `perdure` command needs before it to find this data directory's admin key: nothing
    from the directory `perdure dev` ran in with the default data directory, else
    PERDURE_DATA_DIR (a shell prefix)."""
    if data_dir == Path(DEFAULT_DATA_DIR).resolve():
        return ""
    return f"PERDURE_DATA_DIR={shlex.quote(str(data_dir))} "


def key_finder(data_dir: Path) -> str:
    """Where (or how) a `perdure` command finds the admin key, for people."""
    prefix = cli_environment(data_dir)
    return f"with {prefix.strip()}" if prefix else "from here"


@dataclass
class Child:
    """A supervised process of the local cluster."""

    name: str
    command: list[str]
    env: dict[str, str]
    restarts: int = 0
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    exits_in_a_row: int = 0  # exits each soon after its start
    restart_at: float | None = None  # when it is due to start again after an exit

    def start(self) -> None:
        """Start (or restart) the process; it gets SIGTERM if `perdure dev` itself dies."""
        self.restart_at = None
        self.started_at = time.monotonic()
        self.popen = subprocess.Popen(self.command, env=self.env, preexec_fn=_die_with_parent)

    def exited(self) -> float:
        """Note an exit; the delay before the next start (doubling while it keeps exiting)."""
        ran = time.monotonic() - self.started_at
        self.exits_in_a_row = 1 if ran >= HEALTHY_AFTER else self.exits_in_a_row + 1
        first, longest = RESTART_DELAY
        delay: float = min(first * 2.0 ** (self.exits_in_a_row - 1), longest)
        self.restart_at = time.monotonic() + delay
        return delay

    def running(self) -> bool:
        """Whether the process is alive."""
        return self.popen is not None and self.popen.poll() is None


def free_base_port() -> int:
    """A base port such that it, the next two (gateway, history, scheduler) and the HTTP port
    are free now, for a second local cluster beside the default one (demos, tests,
    measurements)."""
    for _ in range(200):
        base = random.randint(20000, 40000)
        try:
            for port in (base, base + 1, base + 2, base + HTTP_OFFSET):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("found no free ports for a local cluster")


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the parent dies."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    """Start everything, print where it listens, stop it all on Ctrl-C or SIGTERM.

    A process that dies (say, a worker killed with kill -9 to watch a workflow recover) is
    started again: a service up to MAX_RESTARTS times, the worker always, after a delay that
    grows while it keeps dying (a step that crashes it must not take the cluster down).
    """
    try:
        bind = Bind.of(args.bind)
    except ValueError as error:
        print(f"perdure dev: --bind {args.bind}: {error}", file=sys.stderr)
        return 2
    if args.insecure and not bind.loopback:
        print(INSECURE_ELSEWHERE.format(host=args.bind), file=sys.stderr)
        return 2
    if not 1 <= args.cells <= MAX_CELLS:
        print(f"perdure dev: --cells must be from 1 to {MAX_CELLS}", file=sys.stderr)
        return 2
    print(f"perdure dev: {bind.said()}", flush=True)
    ports = {service: args.base_port + offset for offset, service in enumerate(SERVICES)}
    http_port = args.base_port + HTTP_OFFSET
    data_dir = Path(args.data_dir).resolve()
    print(f"perdure dev: starting PostgreSQL with data in {data_dir} ...", flush=True)
    dsn = start_embedded_postgres(data_dir, keep_running=False)
    cells = dev_cells(dsn, args.cells, bind, args.base_port)
    # What every process gets; what only the services get (the database, the internal secret)
    # and what only the worker gets (its key) are added below, each to its own copy.
    common = {
        name: value
        for name, value in os.environ.items()
        if name not in SERVICE_ONLY
        and name != "PERDURE_API_KEY"  # the worker gets a key of its own below
        # This cluster's ports are the ones listed at start, on the --bind address alone.
        and name not in {f"PERDURE_{s.upper()}_HEALTH_LISTEN" for s in SERVICES}
    }
    common["PERDURE_HISTORY_ADDRESS"] = bind.address(ports["history"])
    common["PERDURE_SCHEDULER_ADDRESS"] = bind.address(ports["scheduler"])
    if args.otlp:
        common["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otlp  # exporters default to otlp when set
    common["PERDURE_AUTH"] = "off" if args.insecure else "on"
    if len(cells) > 1:
        common["PERDURE_CELLS"] = ";".join(cell.spelled() for cell in cells)
    service_env = {**common, "PERDURE_DATABASE_URL": dsn}
    if not args.insecure:  # fresh for every run, held by no file and shown nowhere
        service_env[INTERNAL_SECRET] = secrets.token_urlsafe(32)
    children: list[Child] = []
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        for cell in cells:
            for service in ("scheduler", "history"):
                command = [sys.executable, "-m", f"perdure.{service}"]
                command += ["--listen", bind.listen(cell.ports[service])]
                env = {**service_env, **cell.env()}
                child = Child(f"{service}{cell.suffix}", command, env)
                child.start()
                children.append(child)
        for child, address in zip(children, _addresses(cells, bind), strict=True):
            wait_serving(address, STARTUP_TIMEOUT, still_running=child.running)
        command = [sys.executable, "-m", "perdure.gateway"]
        command += ["--listen", bind.listen(ports["gateway"])]
        command += ["--http-listen", bind.listen(http_port)]
        gateway_env = dict(service_env)
        if len(cells) > 1:
            gateway_env["PERDURE_DIRECTORY_DATABASE_URL"] = _database(dsn, "perdure_directory")
        child = Child("gateway", command, gateway_env)
        child.start()
        children.append(child)
        wait_serving(bind.address(ports["gateway"]), STARTUP_TIMEOUT, still_running=child.running)
        http = f"http://{bind.address(http_port)}"
        ui = f"{http}/"
        if args.insecure:
            access = INSECURE_BANNER.format(host=bind.host)
            worker_env = common
        else:
            admin_key = _dev_key(dsn, data_dir / DEV_KEY_FILE, "admin")
            worker_key = _dev_key(dsn, data_dir / "worker.key", "worker", ["*"])
            copy_keys(dsn, [cell.dsn for cell in cells[1:]])  # valid in every cell
            worker_env = {**common, "PERDURE_API_KEY": worker_key}
            ui += f"#key={admin_key}"  # the page keeps the key; a fragment is never sent
            access = (
                f"  API key    {admin_key}\n"
                f"             (admin of namespace default; kept in {data_dir / DEV_KEY_FILE}, "
                f"which `perdure` run {key_finder(data_dir)} uses;\n"
                "             elsewhere: export PERDURE_API_KEY=<the key>)\n"
                "  internal   a secret made for this run, held by gateway, history and scheduler "
                "only\n"
            )
        modules = args.worker_module or list(EXAMPLE_MODULES)
        worker = [sys.executable, "-m", "perdure.worker"]
        for module in modules:
            worker += ["--module", module]
        children.append(Child("worker", worker, worker_env))
        children[-1].start()
        gateway = bind.address(ports["gateway"])
        cli = "" if args.insecure else cli_environment(data_dir)
        print(
            "\nperdure dev is up:\n"
            f"  web UI     {ui}\n"
            f"  HTTP API   {http}/v1/workflows  (OpenAPI: /openapi.json)\n"
            f"  gateway    {gateway}   (WorkflowService; grpcurl -plaintext {gateway} list; "
            "calls need -H 'authorization: Bearer <key>')\n"
            + _cells_said(cells, bind)
            + f"  worker     {', '.join(modules)}\n"
            f"  database   {dsn}\n"
            f"  listening  {bind.summary()}\n"
            + access
            + (f"  telemetry  traces and metrics to {args.otlp}\n" if args.otlp else "")
            + f"Try: {cli}perdure workflow --address {gateway} start research_agent "
            '--input \'{"topic": "durable agents"}\' --id demo-1\n'
            f"     {cli}perdure approve --address {gateway} demo-1\n"
            "Ctrl-C stops everything.\n",
            flush=True,
        )
        while not stopping:
            for child in children:
                assert child.popen is not None
                if child.popen.poll() is None or stopping:
                    continue
                if child.restart_at is not None:  # waiting out its restart delay
                    if time.monotonic() >= child.restart_at:
                        child.start()
                    continue
                if child.name != "worker" and child.restarts >= MAX_RESTARTS:
                    print(f"perdure dev: the {child.name} keeps exiting; stopping", file=sys.stderr)
                    return 1
                child.restarts += 1
                delay = child.exited() if child.name == "worker" else 0.0
                print(
                    f"perdure dev: the {child.name} exited with {child.popen.returncode}; "
                    f"starting it again in {delay:g}s",
                    file=sys.stderr,
                    flush=True,
                )
                if delay == 0:
                    child.start()
            time.sleep(0.2)
        return 0
    except (RuntimeError, TimeoutError) as error:
        print(f"perdure dev: {error}; see its output above", file=sys.stderr)
        return 1
    finally:
        _stop_all(children)


@dataclass(frozen=True)
class DevCell:
    """One cell of the local cluster: its database and its history's and scheduler's ports."""

    name: str
    dsn: str
    ports: dict[str, int]
    address: Callable[[int], str]
    suffix: str  # after its processes' names: "" with one cell

    def env(self) -> dict[str, str]:
        """What its history and scheduler get: its database, and each other's addresses
        (history's relay enqueues in its own cell's scheduler)."""
        return {
            "PERDURE_DATABASE_URL": self.dsn,
            "PERDURE_HISTORY_ADDRESS": self.address(self.ports["history"]),
            "PERDURE_SCHEDULER_ADDRESS": self.address(self.ports["scheduler"]),
        }

    def spelled(self) -> str:
        """Its entry in PERDURE_CELLS."""
        history, scheduler = (self.address(self.ports[s]) for s in ("history", "scheduler"))
        return f"{self.name}={history}/{scheduler}"


def dev_cells(dsn: str, count: int, bind: Bind, base_port: int) -> list[DevCell]:
    """The cells: the first in the embedded server's database (as with one cell), the others
    in databases of their own beside it, made when missing."""
    cells = []
    for index in range(count):
        name = CELL_NAMES[index]
        cell_dsn = dsn if index == 0 else _database(dsn, f"perdure_cell_{name}")
        ports = {"history": base_port + 10 * index + 1, "scheduler": base_port + 10 * index + 2}
        cells.append(DevCell(name, cell_dsn, ports, bind.address, f" {name}" if count > 1 else ""))
    return cells


def _database(dsn: str, name: str) -> str:
    """The DSN of database `name` on the server of `dsn`, created if missing."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(dsn, dbname=name)


def _addresses(cells: list[DevCell], bind: Bind) -> list[str]:
    """Where each cell's scheduler and history answer, in start order."""
    return [bind.address(cell.ports[s]) for cell in cells for s in ("scheduler", "history")]


def _cells_said(cells: list[DevCell], bind: Bind) -> str:
    lines = []
    for cell in cells:
        label = f"cell {cell.name}" if len(cells) > 1 else ""
        lines.append(f"  history    {bind.address(cell.ports['history'])}   {label}".rstrip())
        lines.append(f"  scheduler  {bind.address(cell.ports['scheduler'])}   {label}".rstrip())
    return "".join(line + "\n" for line in lines)


def copy_keys(source: str, targets: list[str]) -> None:
    """Make the API keys of history's database `source` valid in the others (keys are checked
    in each cell's database: a worker's by its cell's history and scheduler)."""
    if not targets:
        return
    with psycopg.connect(source) as conn:
        rows = conn.execute(f"SELECT {KEY_COLUMNS} FROM history.api_keys").fetchall()
    for target in targets:
        _wait_migrated(target)
        with psycopg.connect(target) as conn:
            conn.cursor().executemany(COPY_KEY, rows)


# The columns of history.api_keys (migration 0006), and their upsert into another cell.
KEY_COLUMNS = (
    "key_id, secret_sha256, namespace, role, task_queues, name, created_by, created_at, revoked_at"
)
COPY_KEY = f"""
INSERT INTO history.api_keys ({KEY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (key_id) DO UPDATE SET revoked_at = EXCLUDED.revoked_at
"""


def _wait_migrated(dsn: str) -> None:
    """Until history's migrations made its keys table there (history migrates at start)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        with psycopg.connect(dsn) as conn:
            found = conn.execute("SELECT to_regclass('history.api_keys')").fetchone()
        if found is not None and found[0] is not None:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"history's tables did not appear in {dsn}")
        time.sleep(0.2)


@dataclass(frozen=True)
class Bind:
    """The address every port of the local cluster listens on (--bind), and how its own
    processes and the person running it reach those ports."""

    host: str  # without brackets
    loopback: bool  # reachable from this machine only
    wildcard: bool  # 0.0.0.0 or ::, every interface

    @classmethod
    def of(cls, given: str) -> Bind:
        """An IP address or a host name; ValueError when it names no address."""
        host = given.strip().removeprefix("[").removesuffix("]")
        if not host:
            raise ValueError("an address is needed (127.0.0.1, 0.0.0.0, ...)")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:  # a name: loopback only if everything it resolves to is
            try:
                found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
            except OSError as error:
                raise ValueError(f"not an address of this machine ({error})") from None
            resolved = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}
            return cls(host, all(a.is_loopback for a in resolved), wildcard=False)
        return cls(str(ip), ip.is_loopback, wildcard=ip.is_unspecified)

    def _hostport(self, host: str, port: int) -> str:
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def listen(self, port: int) -> str:
        """host:port to listen on."""
        return self._hostport(self.host, port)

    def address(self, port: int) -> str:
        """host:port to connect to: a wildcard is reached over loopback."""
        if self.wildcard:
            return self._hostport("::1" if ":" in self.host else LOOPBACK, port)
        return self._hostport(self.host, port)

    def summary(self) -> str:
        """Where the ports are, and who reaches them."""
        if self.loopback:
            return f"{self.host} only (loopback: nothing outside this machine reaches it)"
        return (
            f"{self.host} (reachable from other machines: every call needs an API key, and "
            "the services' calls to each other the internal secret of this run)"
        )

    def said(self) -> str:
        """The line said at start."""
        if self.loopback:
            return (
                "gateway, history, scheduler, HTTP API and web UI listen on "
                f"{self.summary()}; --bind HOST to change"
            )
        return f"gateway, history, scheduler, HTTP API and web UI listen on {self.summary()}"


INSECURE_BANNER = (
    "  !!!!!!!!!  INSECURE: no API keys (--insecure). Anyone who can reach these ports can read\n"
    "  !!!!!!!!!  and change every workflow, and call history and the scheduler directly.\n"
    "  !!!!!!!!!  LOOPBACK ONLY ({host}) because nothing is authenticated: never forward or\n"
    "  !!!!!!!!!  expose these ports beyond this machine.\n"
)
INSECURE_ELSEWHERE = (
    "perdure dev: refusing --insecure with --bind {host}: with no API keys and no internal "
    "secret, anyone who reaches a port could read and change every workflow and call history "
    "and the scheduler directly, so --insecure listens on loopback only (the default, "
    "127.0.0.1). To reach the cluster from another machine, leave out --insecure: every call "
    "then needs an API key."
)


def _dev_key(dsn: str, path: Path, role: str, task_queues: list[str] | None = None) -> str:
    """The key kept in `path` while it still works, else a new one written there (0600)."""
    kept = path.read_text().strip() if path.is_file() else None
    if kept is not None and asyncio.run(_works(dsn, kept)):
        return kept
    token = create_in_database(dsn, role, task_queues or [], f"perdure dev {role}")
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token


async def _works(dsn: str, token: str) -> bool:
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        try:
            await keys.verify(conn, token)
        except ApiError:
            return False
        return True


def _stop_all(children: list[Child]) -> None:
    """SIGTERM in reverse start order (worker first), then SIGKILL what lingers."""
    for child in reversed(children):
        if child.popen is not None and child.popen.poll() is None:
            child.popen.send_signal(signal.SIGTERM)
            try:
                child.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.popen.kill()
                child.popen.wait()
