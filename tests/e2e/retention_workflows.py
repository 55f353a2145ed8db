"""Workflows of tests/e2e/test_retention.py: runs that close at once, with step outputs large
enough to be stored by content, and one that waits for a signal."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


def same(value: str) -> str:
    """A step body: its output is its input."""
    return value


@workflow
async def echo(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """One step per blob, each output the blob; returns how many."""
    for index, blob in enumerate(params.get("blobs", [])):
        await ctx.step(f"blob_{index}", same, blob)
    return len(params.get("blobs", []))


@workflow
async def waits_for_go(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Waits for the signal "go", then returns what it carried."""
    value: str = await ctx.wait_for_signal("go")
    return value
