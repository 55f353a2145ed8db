"""tests/e2e/gate_workflows.py's gate_order with a step added after the wait, past where the
waiting runs are: it replays them."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow
from tests.e2e.gate_workflows import charge, reserve, ship


def receipt(text: str) -> str:
    return f"receipt for {text}"


@workflow
async def gate_order(ctx: WorkflowContext, n: int) -> str:
    reserved = await ctx.step("reserve", reserve, n)
    charged = await ctx.step("charge", charge, reserved)
    await ctx.wait_for_signal("ship")
    shipped = await ctx.step("ship", ship, charged)
    return str(await ctx.step("receipt", receipt, shipped))
