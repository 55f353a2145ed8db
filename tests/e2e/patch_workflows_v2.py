"""The workflows `release` and `gated_release` redeployed with their steps changed, each behind
a patch (tests/e2e/test_patches.py): a run that went past a step on the old code, or began it
there, keeps that step."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow
from tests.e2e.patch_workflows_v1 import wait_for_gate


@workflow(name="release")
async def release(ctx: WorkflowContext) -> dict[str, str]:
    if ctx.patched("prepare-v2"):
        prepared = await ctx.step("prepare_v2", lambda: "v2")
    else:
        prepared = await ctx.step("prepare", lambda: "v1")
    await ctx.wait_for_signal("go")
    if ctx.patched("finish-v2"):
        finished = await ctx.step("finish_v2", lambda: "v2")
    else:
        finished = await ctx.step("finish", lambda: "v1")
    return {"prepare": prepared, "finish": finished}


@workflow(name="gated_release")
async def gated_release(ctx: WorkflowContext, gate: str) -> dict[str, str]:
    if ctx.patched("prepare-v2"):
        return {"prepare": await ctx.step("prepare_v2", lambda: "v2")}
    return {"prepare": await ctx.step("prepare", wait_for_gate, gate)}
