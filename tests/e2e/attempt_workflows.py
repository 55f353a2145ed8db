"""Workflows of the attempt-counting and time-limit tests (tests/e2e/test_attempts.py)."""

from __future__ import annotations

import os
import time
from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, current_step, heartbeat, workflow

QUICK = RetryPolicy(initial_interval=0.2, maximum_attempts=3)
HANG_SECONDS = 20.0  # a hung first attempt: abandoned long before it would end


def beating(seconds: float) -> str:
    """Run `seconds`, calling heartbeat() every 0.1 s."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        heartbeat()
        time.sleep(0.1)
    return "steady"


def silent_first_attempt() -> int:
    """Hang without a heartbeat on the first attempt; return the attempt on the next."""
    attempt = current_step().attempt
    if attempt == 1:
        time.sleep(HANG_SECONDS)
    return attempt


@workflow
async def heartbeat_limits(ctx: WorkflowContext) -> dict[str, Any]:
    """A step that heartbeats for longer than its heartbeat timeout runs to its end; one that
    goes silent fails with StepHeartbeatTimeoutError and its retry completes."""
    steady = await ctx.step("steady", beating, 1.5, heartbeat_timeout=0.5, retry=QUICK)
    silent = await ctx.step("silent", silent_first_attempt, heartbeat_timeout=0.5, retry=QUICK)
    return {"steady": steady, "silent": silent}


@workflow
async def waits_for_go(ctx: WorkflowContext) -> Any:
    """Waits for the signal "go" (holding no worker meanwhile)."""
    return await ctx.wait_for_signal("go")


@workflow
async def crashes_its_worker(ctx: WorkflowContext) -> None:
    """Its own code (outside any step) kills the worker every time it runs."""
    os._exit(71)


@workflow
async def calls_crashing_step(ctx: WorkflowContext, queue: str) -> Any:
    """Calls the remote step "crash" (which kills the worker executing it) on `queue`."""
    retry = RetryPolicy(initial_interval=0.5, maximum_attempts=2)
    return await ctx.call("crash", None, task_queue=queue, retry=retry)
