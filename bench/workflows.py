"""The workflows the benchmark runs: no-op steps (local and remote), a timer, a signal, a step
held by a gate."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, remote_step, workflow

# A killed worker's attempt counts as failed and waits its retry backoff: a short one, so that
# the recovery measured is the failover's, not the policy's (1 s by default).
QUICK_RETRY = RetryPolicy(initial_interval=0.05)


def _noop() -> int:
    return 1


def _now() -> str:
    return datetime.now(UTC).isoformat()


async def _until_exists(gate: str) -> None:
    """Wait for the gate file without holding a thread (fifty of these run at once)."""
    while not Path(gate).exists():  # noqa: ASYNC110, ASYNC240 - a file, not an event
        await asyncio.sleep(0.005)


@workflow
async def noop_steps(ctx: WorkflowContext, count: int) -> int:
    """`count` steps that do nothing: what remains is Perdure's own cost."""
    for _ in range(count):
        await ctx.step("noop", _noop)
    return count


@remote_step
async def remote_noop(_: Any) -> int:
    """A remote step that does nothing, executed by whichever worker takes its step task."""
    return 1


@workflow
async def remote_steps(ctx: WorkflowContext, count: int) -> int:
    """`count` remote no-op steps one after the other: each is a step task of its own, and
    the workflow is suspended and replayed between them."""
    for _ in range(count):
        await ctx.call("remote_noop")
    return count


@workflow
async def remote_fan_out(ctx: WorkflowContext, count: int) -> int:
    """`count` remote no-op steps side by side, awaited together."""
    return len(await ctx.gather(*(ctx.call("remote_noop") for _ in range(count))))


@workflow
async def sleeper(ctx: WorkflowContext, seconds: float) -> str:
    """Sleeps, then records when the code resumed."""
    await ctx.sleep(seconds)
    return str(await ctx.step("resumed", _now))


@workflow
async def signalled(ctx: WorkflowContext) -> str:
    """Waits for "go", then records when the code resumed."""
    await ctx.wait_for_signal("go")
    return str(await ctx.step("resumed", _now))


@workflow
async def held(ctx: WorkflowContext, gate: str) -> str:
    """A step that runs until the gate file exists, then records when the code went on."""
    await ctx.step("hold", _until_exists, gate, retry=QUICK_RETRY)
    return str(await ctx.step("resumed", _now))
