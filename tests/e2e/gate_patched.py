"""tests/e2e/gate_reordered.py's swap behind `ctx.patched`: runs that took the old order keep
it, so it replays them."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow
from tests.e2e.gate_workflows import charge, reserve, ship


@workflow
async def gate_order(ctx: WorkflowContext, n: int) -> str:
    if ctx.patched("charge-first"):
        charged = await ctx.step("charge", charge, n)
        await ctx.step("reserve", reserve, n)
    else:  # the code the recorded runs took
        reserved = await ctx.step("reserve", reserve, n)
        charged = await ctx.step("charge", charge, reserved)
    await ctx.wait_for_signal("ship")
    return str(await ctx.step("ship", ship, charged))
