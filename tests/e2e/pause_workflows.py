"""Workflows of the pause tests: runs that need a new grant between every two steps (a short
timer), so that a pause shows at once in their grants; and one that waits on a longer timer."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


def _tick(value: int) -> int:
    return value


async def _ticks(ctx: WorkflowContext, args: dict[str, Any]) -> int:
    done = 0
    for _ in range(args["steps"]):
        done += await ctx.step("tick", _tick, 1)
        await ctx.sleep(args["gap"])
    return done


@workflow
async def ticker(ctx: WorkflowContext, args: dict[str, Any]) -> int:
    """`steps` steps with a timer of `gap` seconds after each: a gap above the worker's local wait
    (0.25 s) suspends the run, so each step comes in a lease of its own."""
    return await _ticks(ctx, args)


@workflow
async def other_ticker(ctx: WorkflowContext, args: dict[str, Any]) -> int:
    """The same under another type, for pausing one type and not the other."""
    return await _ticks(ctx, args)


@workflow
async def sleeper(ctx: WorkflowContext, args: dict[str, Any]) -> str:
    """A step, a timer of `seconds`, then the database time at which the run went on."""
    await ctx.step("before", _tick, 0)
    await ctx.sleep(args["seconds"])
    woke = await ctx.now()
    return woke.isoformat()


def _slow(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "slow done"


@workflow
async def slow_then_tick(ctx: WorkflowContext, args: dict[str, Any]) -> list[Any]:
    """A slow step, a timer that suspends the run, then a quick step."""
    slow = await ctx.step("slow", _slow, args["seconds"])
    await ctx.sleep(0.5)
    return [slow, await ctx.step("after", _tick, 1)]
