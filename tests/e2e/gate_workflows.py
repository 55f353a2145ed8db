"""Workflows of tests/e2e/test_replay_gate.py, as deployed: an order that reserves and charges,
then waits for the signal "ship"; and a type the changed code (gate_reordered, gate_appended)
does not have."""

from __future__ import annotations

from perdure.worker import WorkflowContext, workflow


def reserve(n: int) -> int:
    return n


def charge(n: int) -> int:
    return n + 1


def ship(n: int) -> str:
    return f"shipped {n}"


@workflow
async def gate_order(ctx: WorkflowContext, n: int) -> str:
    reserved = await ctx.step("reserve", reserve, n)
    charged = await ctx.step("charge", charge, reserved)
    await ctx.wait_for_signal("ship")
    return str(await ctx.step("ship", ship, charged))


@workflow
async def gate_other(ctx: WorkflowContext) -> None:
    await ctx.wait_for_signal("never")
