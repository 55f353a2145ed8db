"""Workflows of tests/e2e/test_chains.py: a loop of turns that continues as new every few
turns, and a workflow that returns its input or fails on request."""

from __future__ import annotations

from typing import Any

from perdure.worker import WorkflowContext, workflow


@workflow
async def chain_turns(ctx: WorkflowContext, state: dict[str, Any]) -> dict[str, Any]:
    """Takes one signal "msg" per turn until `total` are seen; after `every` turns in a run,
    continues as new with what it has seen (and the history length it had reached)."""
    seen, lengths = list(state["seen"]), list(state["lengths"])
    turn = 0
    while len(seen) < state["total"]:
        if turn == state["every"]:
            lengths.append(ctx.info.history_length)
            await ctx.continue_as_new({**state, "seen": seen, "lengths": lengths})
        seen.append(await ctx.wait_for_signal("msg"))
        turn += 1
    info = ctx.info
    return {"seen": seen, "lengths": lengths, "run_id": info.run_id, "run": info.run_number}


@workflow
async def chain_once(ctx: WorkflowContext, value: Any) -> Any:
    """Returns its input, or fails when the input is "fail"."""
    if value == "fail":
        raise ValueError("asked to fail")
    return value
