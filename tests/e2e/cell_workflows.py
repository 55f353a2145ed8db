"""Workflows for tests/e2e/test_cells.py: a run that records one step, a parent whose child
starts inside the parent's cell, and a run that waits for a signal."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


@workflow
async def cell_echo(ctx: WorkflowContext, input: Any) -> str:
    """One step: its own workflow id."""
    return str(await ctx.step("echo", lambda: ctx.workflow_id))


@workflow
async def cell_parent(ctx: WorkflowContext, input: dict[str, str]) -> str:
    """Runs cell_echo as a child with the id it is given; returns the child's result."""
    return str(await ctx.child("cell_echo", None, id=input["child"]))


@workflow
async def cell_waits(ctx: WorkflowContext, input: Any) -> Any:
    """Waits for signal "go" and returns its payload."""
    return await ctx.wait_for_signal("go")


@workflow
async def cell_asks(ctx: WorkflowContext, input: Any) -> bool:
    """Asks a person to approve; returns whether they did."""
    decision = await ctx.approval("go-ahead", {"run": ctx.workflow_id}, timeout=600)
    return decision.approved
