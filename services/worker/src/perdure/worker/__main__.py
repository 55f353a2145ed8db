"""Run a worker for the workflows and remote steps of a module: `perdure worker --module
your.module`."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from opentelemetry import metrics, trace

from perdure.telemetry import telemetry_for
from perdure.worker._cells import parse_cells
from perdure.worker._errors import WorkerConfigurationError
from perdure.worker._health import HealthPort
from perdure.worker._registry import remote_step_name, workflow_name
from perdure.worker._worker import CLOSE_SECONDS, Worker

try:  # a faster event loop where it exists (not on Windows); measured with make bench
    from uvloop import run as run_loop
except ImportError:  # Windows
    from asyncio import run as run_loop  # type: ignore[assignment]

log = logging.getLogger("perdure.worker")

# After the drain (shutdown_grace) the stream closes within CLOSE_SECONDS; this much more and
# the process ends whatever still runs: a sync step's thread cannot be stopped, and Python
# would otherwise wait for it at exit, forever if it never returns.
EXIT_MARGIN_SECONDS = 2.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure worker", description=__doc__)
    parser.add_argument(
        "--module",
        action="append",
        required=True,
        help="module whose @workflow and @remote_step functions to serve (repeatable); "
        "the current directory is importable",
    )
    parser.add_argument(
        "--task-queue",
        default=os.environ.get("PERDURE_TASK_QUEUE", "default"),
        help="task queue to serve (PERDURE_TASK_QUEUE, default 'default')",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=int(os.environ.get("PERDURE_WORKER_CONCURRENCY", "10")),
        help="workflows run at once (PERDURE_WORKER_CONCURRENCY, default 10)",
    )
    parser.add_argument(
        "--scheduler",
        default=os.environ.get("PERDURE_SCHEDULER_ADDRESS", "localhost:7402"),
        help="scheduler address (PERDURE_SCHEDULER_ADDRESS, default localhost:7402)",
    )
    parser.add_argument(
        "--history",
        default=os.environ.get("PERDURE_HISTORY_ADDRESS", "localhost:7401"),
        help="history address (PERDURE_HISTORY_ADDRESS, default localhost:7401)",
    )
    parser.add_argument(
        "--cells",
        default=os.environ.get("PERDURE_CELLS", ""),
        help="serve several cells: 'name=history_address/scheduler_address' entries separated "
        "by ';' (PERDURE_CELLS, as the gateway's); replaces --scheduler and --history",
    )
    parser.add_argument(
        "--identity",
        default=os.environ.get("PERDURE_WORKER_IDENTITY"),
        help="name shown to operators (PERDURE_WORKER_IDENTITY, default host:pid)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("PERDURE_NAMESPACE", ""),
        help="namespace to serve (PERDURE_NAMESPACE; default: the worker key's, or 'default'); "
        "the worker key itself is read from PERDURE_API_KEY only, never from a flag that "
        "`ps` would show",
    )
    parser.add_argument(
        "--build-id",
        default=os.environ.get("PERDURE_BUILD_ID"),
        help="the version of the code, for routing policies (PERDURE_BUILD_ID; default: 12 hex "
        "digits of the SHA-256 of the served modules' source)",
    )
    parser.add_argument(
        "--health-listen",
        default=os.environ.get("PERDURE_WORKER_HEALTH_LISTEN"),
        help="host:port of a plaintext grpc.health.v1 port for probes (PERDURE_WORKER_HEALTH_"
        "LISTEN; none by default): SERVING while the worker runs, NOT_SERVING once it drains",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=10.0,
        help="seconds running workflows get to finish on SIGTERM (default 10); the process "
        "ends a few seconds later whatever its steps do",
    )
    args = parser.parse_args(argv)
    try:
        args.cell_list = parse_cells(args.cells) if args.cells.strip() else []
    except ValueError as error:
        parser.error(f"--cells (PERDURE_CELLS): {error}")
    return args


def find_marked(module: ModuleType, name_of: Callable[[Any], str | None]) -> list[Any]:
    """Every function defined or imported at the module's top level that `name_of` names."""
    found = [value for value in vars(module).values() if name_of(value) is not None]
    return list(dict.fromkeys(found))  # a function imported under two names counts once


async def run(args: argparse.Namespace) -> None:
    """Serve until SIGTERM or SIGINT, then drain."""
    sys.path.insert(0, os.getcwd())
    workflows: list[Any] = []
    steps: list[Any] = []
    for name in args.module:
        module = importlib.import_module(name)
        found_workflows = find_marked(module, workflow_name)
        found_steps = find_marked(module, remote_step_name)
        if not found_workflows and not found_steps:
            raise SystemExit(
                f"perdure worker: module {name!r} defines no @workflow or @remote_step functions"
            )
        workflows.extend(found_workflows)
        steps.extend(found_steps)
    worker = Worker(
        workflows,
        steps=steps,
        task_queue=args.task_queue,
        concurrency=args.concurrency,
        scheduler=args.scheduler,
        history=args.history,
        identity=args.identity,
        shutdown_grace=args.shutdown_grace,
        namespace=args.namespace,
        build_id=args.build_id,
        cells=args.cell_list,
    )
    health = HealthPort(args.health_listen) if args.health_listen else None
    if health is not None:
        await health.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    deadline = args.shutdown_grace + CLOSE_SECONDS + EXIT_MARGIN_SECONDS

    def on_signal(signum: int, frame: object) -> None:
        # A plain handler, not the loop's: it runs even while a step blocks the event loop.
        exit_by(deadline)
        loop.call_soon_threadsafe(stop.set)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    running = asyncio.create_task(worker.run())
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if health is not None:
            await health.draining()  # probes see it before the drain begins
        worker.stop()
        await running
    finally:
        stopped.cancel()
        if health is not None:
            await health.stop()
        # What is left is waiting for the step threads: an abandoned one may never return.
        exit_by(EXIT_MARGIN_SECONDS)


_exit_at: float | None = None  # monotonic


def exit_by(seconds: float) -> None:
    """End the process within `seconds`, whatever still runs (the earliest deadline wins)."""
    global _exit_at
    at = time.monotonic() + seconds
    if _exit_at is not None and _exit_at <= at:
        return
    _exit_at = at
    timer = threading.Timer(seconds, _exit_now, args=(at,))
    timer.daemon = True
    timer.start()


def _exit_now(at: float) -> None:
    """Flush what telemetry can be flushed and end the process at once (unless a nearer
    deadline took over)."""
    if at != _exit_at:
        return
    log.warning(
        "exiting although user code still runs: a sync step's thread (which cannot be "
        "stopped) or an async step blocking the event loop outlived the shutdown grace; its "
        "step runs again elsewhere"
    )
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        flush = getattr(provider, "force_flush", None)
        if flush is not None:
            flush(1000)
    logging.shutdown()
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> None:
    """Run a worker process; exit 1 with the reason when its configuration cannot work."""
    args = parse_args(argv)
    with telemetry_for("perdure-worker"):
        try:
            run_loop(run(args))
        except WorkerConfigurationError as error:
            raise SystemExit(f"perdure worker: {error}") from None


if __name__ == "__main__":
    main()
