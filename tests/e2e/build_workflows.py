"""Workflows of the build routing tests: each runs a step, waits for the signal "go", runs
another, and returns which worker ran each step (its PERDURE_WORKER_IDENTITY), so a test can
tell which build's worker ran each part of a run."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from perdure.worker import WorkflowContext, workflow


async def whoami(hold: float = 0.0) -> str:
    """The worker running the step, after `hold` seconds."""
    if hold:
        await asyncio.sleep(hold)
    return os.environ.get("PERDURE_WORKER_IDENTITY", "?")


async def _two_steps(ctx: WorkflowContext, args: dict[str, Any]) -> list[str]:
    first = await ctx.step("first", whoami)
    await ctx.wait_for_signal("go")
    second = await ctx.step("second", whoami, args.get("hold", 0.0))
    return [first, second]


@workflow
async def pinned_flow(ctx: WorkflowContext, args: dict[str, Any]) -> list[str]:
    """The type the tests pin."""
    return await _two_steps(ctx, args)


@workflow
async def upgrading_flow(ctx: WorkflowContext, args: dict[str, Any]) -> list[str]:
    """The type the tests auto-upgrade."""
    return await _two_steps(ctx, args)
