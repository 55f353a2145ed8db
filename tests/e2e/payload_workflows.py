"""The workflow of tests/e2e/test_payloads.py (its Node.js twin is node_worker.mjs's
`echo_payloads`): a value goes in as the input, through a step's output, into published
state, and a signal's value comes back as the result."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


@workflow
async def echo_payloads(ctx: WorkflowContext, value: Any) -> Any:
    """Return the signal "value"; publish the step's output as "echoed" and the signal's
    value as "signalled"."""
    echoed = await ctx.step("echo", lambda: value)
    await ctx.set_state("echoed", echoed)
    signalled = await ctx.wait_for_signal("value")
    await ctx.set_state("signalled", signalled)
    return signalled


@workflow
async def returns_unencodable(ctx: WorkflowContext, kind: str) -> Any:
    """A step whose result cannot be encoded: its failure is what the workflow sees."""
    unencodable = {"nan": float("nan"), "set": {1, 2}}[kind]
    try:
        await ctx.step("unencodable", lambda: unencodable)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "encoded"
