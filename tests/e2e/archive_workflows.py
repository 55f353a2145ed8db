"""The workflow of tests/e2e/test_run_archive.py: steps (one output large enough to be stored
by content), signals, published state, retried attempts, and a close that completes or
fails."""

from __future__ import annotations

from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, workflow

LARGE = 40_000  # characters: above PERDURE_PAYLOAD_REF_BYTES (16 KiB), stored by content


def _charge(decision: str) -> str:
    if decision != "approve":
        raise RuntimeError(f"card declined ({decision})")
    return "charged"


@workflow
async def archived_order(ctx: WorkflowContext, order: dict[str, Any]) -> Any:
    """Price the order, print a large label, wait for "decide" (after a "note"), then charge:
    completes when the decision is "approve", fails after two attempts otherwise."""
    price = await ctx.step("price", lambda: {"total": order["qty"] * 3})
    label = await ctx.step("label", lambda: "x" * LARGE)
    note = await ctx.wait_for_signal("note")
    await ctx.set_state("note", note)
    decision = await ctx.wait_for_signal("decide")
    charged = await ctx.step(
        "charge",
        _charge,
        decision,
        retry=RetryPolicy(initial_interval=0.1, maximum_attempts=2),
    )
    return {"price": price, "label": len(label), "charged": charged}
