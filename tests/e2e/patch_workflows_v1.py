"""The workflow `release` as first deployed (tests/e2e/test_patches.py): step "prepare", a wait
for signal "go", step "finish"; each step returns the code version that ran it."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow


@workflow(name="release")
async def release(ctx: WorkflowContext) -> dict[str, str]:
    prepared = await ctx.step("prepare", lambda: "v1")
    await ctx.wait_for_signal("go")
    finished = await ctx.step("finish", lambda: "v1")
    return {"prepare": prepared, "finish": finished}
