"""The workflows `release` and `gated_release` as first deployed (tests/e2e/test_patches.py):
`release` runs step "prepare", waits for signal "go", runs step "finish"; `gated_release` runs
step "prepare" that waits for a gate file. Each step returns the code version that ran it."""

from __future__ import annotations

import time
from pathlib import Path

from perdure.worker import WorkflowContext, workflow


@workflow(name="release")
async def release(ctx: WorkflowContext) -> dict[str, str]:
    prepared = await ctx.step("prepare", lambda: "v1")
    await ctx.wait_for_signal("go")
    finished = await ctx.step("finish", lambda: "v1")
    return {"prepare": prepared, "finish": finished}


def wait_for_gate(gate: str) -> str:
    """Say it started (`<gate>.started`), then wait until the file `gate` exists."""
    Path(f"{gate}.started").touch()
    while not Path(gate).exists():
        time.sleep(0.05)
    return "v1"


@workflow(name="gated_release")
async def gated_release(ctx: WorkflowContext, gate: str) -> dict[str, str]:
    return {"prepare": await ctx.step("prepare", wait_for_gate, gate)}
