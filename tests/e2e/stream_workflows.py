"""Workflows and a remote step whose step streams text with current_step().emit (as
tests/e2e/node_worker.mjs's `node_streams` and `node_write` do): attempt k emits
"a<k>.0 ", "a<k>.1 ", ... and returns their concatenation; the first `fail_attempts` attempts
raise after emitting."""

from __future__ import annotations

import asyncio
from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, current_step, remote_step, workflow

FAST_RETRY = RetryPolicy(initial_interval=0.1, backoff_coefficient=1.0, maximum_attempts=3)


class StreamBrokeError(Exception):
    """An attempt that fails after emitting."""


def tokens(attempt: int, n: int) -> list[str]:
    """What attempt `attempt` emits."""
    return [f"a{attempt}.{i} " for i in range(n)]


async def write(input: dict[str, Any]) -> str:
    """Emit `n` chunks (`pause` seconds apart), then fail or return the text."""
    step = current_step()
    words = tokens(step.attempt, input["n"])
    for word in words:
        step.emit(word)
        if input.get("pause"):
            await asyncio.sleep(input["pause"])
    if step.attempt <= input.get("fail_attempts", 0):
        raise StreamBrokeError(f"attempt {step.attempt} fails after emitting")
    return "".join(words)


@workflow
async def streams_text(ctx: WorkflowContext, input: dict[str, Any]) -> str:
    """One local step that streams."""
    text: str = await ctx.step("write", write, input, retry=FAST_RETRY)
    return text


@workflow
async def streams_remote(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
    """One remote step (`input["step"]` on `input["queue"]`) that streams."""
    return await ctx.call(input["step"], input, task_queue=input["queue"], retry=FAST_RETRY)


@remote_step
async def write_remote(input: dict[str, Any]) -> str:
    """`write`, as a remote step."""
    return await write(input)
