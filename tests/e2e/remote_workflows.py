"""Workflows that call remote steps, and the remote steps a Python worker serves for them (and
for the Node.js test workflows). Each step execution appends a JSON line to the ledger named
in its input, with the worker's identity (as tests/e2e/node_worker.mjs does)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from perdure.worker import (
    RetryPolicy,
    WorkflowContext,
    current_step,
    heartbeat,
    remote_step,
    workflow,
)

FAST_RETRY = RetryPolicy(initial_interval=0.2, backoff_coefficient=1.0, maximum_attempts=5)


def note(input: dict[str, Any], kind: str) -> None:
    """Append this execution to the ledger, if the input names one."""
    if "ledger" not in input:
        return
    step = current_step()
    line = {
        "kind": kind,
        "workflow_id": step.workflow_id,
        "step_id": step.step_id,
        "attempt": step.attempt,
        "identity": identity(),
        "fence": step.fence,
    }
    with Path(input["ledger"]).open("a") as ledger:
        ledger.write(json.dumps(line) + "\n")


def identity() -> str:
    """The identity of this worker process (the test cluster sets it for each)."""
    return os.environ.get("PERDURE_WORKER_IDENTITY", str(os.getpid()))


@workflow
async def calls_remote(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Call one remote step, then a local one."""
    result = await ctx.call(
        input["step"],
        input["input"],
        task_queue=input["queue"],
        retry=FAST_RETRY,
        timeout=input.get("timeout"),
    )
    after = await ctx.step("after", lambda: "done")
    return {"remote": result, "after": after}


@workflow
async def fans_out(ctx: WorkflowContext, input: dict[str, Any]) -> list[Any]:
    """Call `square` for 0..n-1 side by side; the squares in call order."""
    calls = [
        ctx.call("square", {**input["step_input"], "n": n}, task_queue=input["queue"])
        for n in range(input["n"])
    ]
    return await ctx.gather(*calls)


@remote_step
def square(input: dict[str, Any]) -> int:
    """n * n, after `delay_ms`; on the worker named `stall_on`, never (until it is killed)."""
    note(input, "square")
    while identity() == input.get("stall_on"):
        time.sleep(0.05)
    time.sleep(input.get("delay_ms", 0) / 1000)
    return int(input["n"]) ** 2


@remote_step
def charge(input: dict[str, Any]) -> dict[str, Any]:
    """Pretend to charge `amount`."""
    note(input, "charge")
    return {"charged": input.get("amount", 0), "by": "python"}


class FlakyError(Exception):
    """The first attempts of `flaky_py` fail with this."""


@remote_step
def flaky_py(input: dict[str, Any]) -> dict[str, int]:
    """Fail the first `fail_times` attempts."""
    note(input, "flaky_py")
    attempt = current_step().attempt
    if attempt <= input["fail_times"]:
        raise FlakyError(f"attempt {attempt} fails on purpose")
    return {"attempts": attempt}


@remote_step
def gated_py(input: dict[str, Any]) -> dict[str, str]:
    """Wait until the file `gate` exists; say which worker finished."""
    note(input, "gated_py")
    while not Path(input["gate"]).exists():
        time.sleep(0.05)
    return {"by": identity()}


@remote_step
async def resumable(input: dict[str, Any]) -> Any:
    """Report progress, then fail the first attempt; later attempts return what the last
    attempt reported."""
    note(input, "resumable")
    step = current_step()
    if step.attempt == 1:
        heartbeat({"done": 41})  # sent in the background, before the failure is recorded
        raise FlakyError("lost the connection half way")
    return step.heartbeat_details
