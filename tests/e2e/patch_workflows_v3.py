"""The workflow `release` once the old "prepare" is removed (tests/e2e/test_patches.py): the
patch is deprecated, so a run that still went through the old step parks instead of running
new code over its journal."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow


@workflow(name="release")
async def release(ctx: WorkflowContext) -> dict[str, str]:
    ctx.deprecate_patch("prepare-v2")
    prepared = await ctx.step("prepare_v2", lambda: "v2")
    await ctx.wait_for_signal("go")
    if ctx.patched("finish-v2"):
        finished = await ctx.step("finish_v2", lambda: "v2")
    else:
        finished = await ctx.step("finish", lambda: "v1")
    return {"prepare": prepared, "finish": finished}
