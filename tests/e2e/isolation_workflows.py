"""Workflows of the isolation tests: runs with large journals, and runs that hold their lease
at a gate while another run's journal calls fail."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from perdure.worker import WorkflowContext, workflow
from tests.e2e.workflows import GATE_TIMEOUT, note

MIB = 1024 * 1024


def output(ledger: str, index: int, size: int) -> str:
    """A step body returning `size` bytes of text."""
    note(ledger, f"output_{index} {os.getpid()}")
    return "x" * size


async def held(ledger: str, gate: str) -> int:
    """A step body that holds its run's lease until the test opens the gate (async: it holds
    none of the threads other runs' sync steps need)."""
    note(ledger, f"start held {os.getpid()}")
    deadline = time.monotonic() + GATE_TIMEOUT
    while not os.path.exists(gate):  # noqa: ASYNC240 (a stat, microseconds)
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {gate} never opened")
        await asyncio.sleep(0.02)
    note(ledger, f"held {os.getpid()}")
    return os.getpid()


@workflow
async def bulky(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """`count` steps of `size` bytes of output each; with `reload`, then a short sleep, so that
    the run is loaded again with its whole journal."""
    for index in range(params["count"]):
        await ctx.step(f"output_{index}", output, params["ledger"], index, params["size"])
    if params.get("reload"):
        await ctx.sleep(0.5)
    return int(params["count"])


@workflow
async def gated(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """One step that waits for the gate file, then more steps."""
    pid: int = await ctx.step("held", held, params["ledger"], params["gate"])
    await ctx.step("after", note, params["ledger"], f"after {os.getpid()}")
    return pid
