"""`perdure dev`: the embedded database, the three services and an example worker, locally."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.common.embedded_db import DEFAULT_DATA_DIR, start_embedded_postgres

SERVICES = ("gateway", "history", "scheduler")  # their ports: base, base + 1, base + 2
STARTUP_TIMEOUT = 60.0


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
        help="gateway port; history and scheduler take the next two (default 7400)",
    )
    parser.add_argument(
        "--worker-module",
        default="examples.research_agent",
        help="module the example worker serves (default examples.research_agent)",
    )


def wait_healthy(address: str, deadline: float) -> None:
    """Block until the server at `address` answers its health check with SERVING."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} did not become healthy in time")
            time.sleep(0.1)


def run(args: argparse.Namespace) -> int:
    """Start everything, print where it listens, stop it all on Ctrl-C or SIGTERM."""
    ports = {service: args.base_port + offset for offset, service in enumerate(SERVICES)}
    data_dir = Path(args.data_dir).resolve()
    print(f"perdure dev: starting PostgreSQL with data in {data_dir} ...", flush=True)
    dsn = start_embedded_postgres(data_dir, keep_running=False)
    env = {
        **os.environ,
        "PERDURE_DATABASE_URL": dsn,
        "PERDURE_HISTORY_ADDRESS": f"localhost:{ports['history']}",
        "PERDURE_SCHEDULER_ADDRESS": f"localhost:{ports['scheduler']}",
    }
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        for service in ("scheduler", "history", "gateway"):
            command = [
                sys.executable,
                "-m",
                f"perdure.{service}",
                "--listen",
                f"0.0.0.0:{ports[service]}",
            ]
            children.append((service, subprocess.Popen(command, env=env)))
            wait_healthy(f"localhost:{ports[service]}", deadline)
        worker = [sys.executable, "-m", "perdure.worker", "--module", args.worker_module]
        children.append(("worker", subprocess.Popen(worker, env=env)))
        print(
            "\nperdure dev is up:\n"
            f"  gateway    localhost:{ports['gateway']}   (WorkflowService; grpcurl -plaintext "
            f"localhost:{ports['gateway']} list)\n"
            f"  history    localhost:{ports['history']}\n"
            f"  scheduler  localhost:{ports['scheduler']}\n"
            f"  worker     {args.worker_module}\n"
            f"  database   {dsn}\n"
            f"Try: perdure workflow --address localhost:{ports['gateway']} start research_agent "
            '--input \'{"topic": "durable agents"}\' --wait\n'
            "Ctrl-C stops everything.\n",
            flush=True,
        )
        while not stopping:
            for name, child in children:
                if child.poll() is not None:
                    print(
                        f"perdure dev: the {name} exited with {child.returncode}; stopping",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(0.2)
        return 0
    finally:
        _stop_all(children)


def _stop_all(children: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """SIGTERM in reverse start order (worker first), then SIGKILL what lingers."""
    for _, child in reversed(children):
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
