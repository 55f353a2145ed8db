"""Workflows of the keyed start tests: one that tells what input it got and when its code
first ran (the database's clock), and one that waits long."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


@workflow
async def echo(ctx: WorkflowContext, args: Any) -> dict[str, Any]:
    began = await ctx.now()
    return {"input": args, "began": began.isoformat()}


@workflow
async def long_wait(ctx: WorkflowContext, args: Any) -> None:
    await ctx.sleep(3600)


@workflow
async def continues_once(ctx: WorkflowContext, args: Any) -> None:
    """Continues as new once, then waits long: a chain of two runs."""
    if not args.get("continued"):
        await ctx.continue_as_new({"continued": True})
    await ctx.sleep(3600)
