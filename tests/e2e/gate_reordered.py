"""tests/e2e/gate_workflows.py's gate_order with its first two steps swapped: it does not
replay the runs that took them in the old order."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow
from tests.e2e.gate_workflows import charge, reserve, ship


@workflow
async def gate_order(ctx: WorkflowContext, n: int) -> str:
    charged = await ctx.step("charge", charge, n)
    await ctx.step("reserve", reserve, n)
    await ctx.wait_for_signal("ship")
    return str(await ctx.step("ship", ship, charged))
