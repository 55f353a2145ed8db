"""Measure durable timer lateness on a fresh local cluster.

    .venv/bin/python tools/measure_timers.py [--workflows 200] [--sleep 1.0]

Starts `perdure dev` on free ports with a temporary data directory, starts N workflows that
each sleep, and reports how late each resumed: the start of the step after the timer minus the
timer's journaled fire time (both on this machine's clock; the fire time is the database's).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.dev_cmd import free_base_port
from perdure.client import Client
from perdure.worker import WorkflowContext, workflow

REPO = Path(__file__).resolve().parent.parent


@workflow
async def sleeper(ctx: WorkflowContext, seconds: float) -> str:
    """Sleep, then record when the code resumed."""
    await ctx.sleep(seconds)
    return str(await ctx.step("resumed", lambda: datetime.now(UTC).isoformat()))


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=1.0)
    args = parser.parse_args()
    port = free_base_port()
    with tempfile.TemporaryDirectory(prefix="perdure-timers-") as data:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        dev = subprocess.Popen(
            [
                sys.executable, "-m", "perdure.cli", "dev", "--data-dir", data,
                "--base-port", str(port), "--worker-module", "tools.measure_timers",
            ],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            return _measure(f"localhost:{port}", args.workflows, args.sleep)
        finally:
            dev.send_signal(signal.SIGTERM)
            dev.wait(timeout=60)


def _measure(address: str, count: int, seconds: float) -> int:
    with Client(address, timeout=60) as client:
        deadline = time.monotonic() + 60
        while True:
            try:
                client.start_workflow("sleeper", 0, workflow_id="warm-up")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        client.wait("warm-up", timeout=60)
        ids = [f"t-{i}" for i in range(count)]
        for workflow_id in ids:
            client.start_workflow("sleeper", seconds, workflow_id=workflow_id)
        lateness = []
        for workflow_id in ids:
            done = client.wait(workflow_id, timeout=120)
            assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done
            [timer] = [
                e
                for e in client.history(workflow_id)
                if e.event_type == wf.EVENT_TYPE_TIMER_STARTED
            ]
            fire = timer.due_time.ToDatetime(tzinfo=UTC)
            resumed = datetime.fromisoformat(done.workflow.result.string_value)
            lateness.append((resumed - fire).total_seconds() * 1000)
    print(f"timers: {count} workflows sleeping {seconds}s")
    print(
        f"lateness ms: min {min(lateness):.1f}  median {statistics.median(lateness):.1f}  "
        f"p99 {_percentile(lateness, 0.99):.1f}  max {max(lateness):.1f}"
    )
    early = [value for value in lateness if value < 0]
    print(f"early: {len(early)}")
    return 1 if early else 0


if __name__ == "__main__":
    sys.exit(main())
