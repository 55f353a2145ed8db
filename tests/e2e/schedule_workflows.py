"""Workflows that schedules start in the tests: one that ends at once, one that stays open
until it is released (a signal) or cancelled."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


@workflow
async def tick(ctx: WorkflowContext, params: Any) -> str:
    return "tock"


@workflow
async def held(ctx: WorkflowContext, params: Any) -> str:
    await ctx.wait_for_signal("release")
    return "released"
