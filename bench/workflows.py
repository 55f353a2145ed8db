"""The workflows the benchmark runs: no-op steps (local and remote), a timer, a signal, a step
held by a gate, steps that stream; and the long loops: a chat of many turns, an autonomous loop
of many steps, a run whose journal holds large outputs."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from examples.research_agent.model import OfflineModel
from perdure.worker import (
    BudgetExceededError,
    RetryPolicy,
    StreamBufferFullError,
    Usage,
    WorkflowContext,
    current_step,
    remote_step,
    workflow,
)

# A killed worker's attempt counts as failed and waits its retry backoff: a short one, so that
# the recovery measured is the failover's, not the policy's (1 s by default).
QUICK_RETRY = RetryPolicy(initial_interval=0.05)


def _noop() -> int:
    return 1


def _now() -> str:
    return datetime.now(UTC).isoformat()


async def _until_exists(gate: str) -> None:
    """Wait for the gate file without holding a thread (fifty of these run at once)."""
    while not Path(gate).exists():  # noqa: ASYNC110, ASYNC240 - a file, not an event
        await asyncio.sleep(0.005)


@workflow
async def noop_steps(ctx: WorkflowContext, count: int) -> int:
    """`count` steps that do nothing: what remains is Perdure's own cost."""
    for _ in range(count):
        await ctx.step("noop", _noop)
    return count


@remote_step
async def remote_noop(_: Any) -> int:
    """A remote step that does nothing, executed by whichever worker takes its step task."""
    return 1


@workflow
async def remote_steps(ctx: WorkflowContext, count: int) -> int:
    """`count` remote no-op steps one after the other: each is a step task of its own, and
    the workflow is suspended and replayed between them."""
    for _ in range(count):
        await ctx.call("remote_noop")
    return count


@workflow
async def remote_fan_out(ctx: WorkflowContext, count: int) -> int:
    """`count` remote no-op steps side by side, awaited together."""
    return len(await ctx.gather(*(ctx.call("remote_noop") for _ in range(count))))


@workflow
async def sleeper(ctx: WorkflowContext, seconds: float) -> str:
    """Sleeps, then records when the code resumed."""
    await ctx.sleep(seconds)
    return str(await ctx.step("resumed", _now))


@workflow
async def sleep_until(ctx: WorkflowContext, moment: str) -> str:
    """Sleeps until `moment` (ISO 8601), then records when the code resumed."""
    await ctx.sleep_until(datetime.fromisoformat(moment))
    return str(await ctx.step("resumed", _now))


@workflow
async def signalled(ctx: WorkflowContext) -> str:
    """Waits for "go", then records when the code resumed."""
    await ctx.wait_for_signal("go")
    return str(await ctx.step("resumed", _now))


@workflow
async def held(ctx: WorkflowContext, gate: str) -> str:
    """A step that runs until the gate file exists, then records when the code went on."""
    await ctx.step("hold", _until_exists, gate, retry=QUICK_RETRY)
    return str(await ctx.step("resumed", _now))


async def _emit_paced(count: int, gap: float) -> int:
    """Emit `count` chunks `gap` seconds apart, each carrying when it was emitted (time.time(),
    the reader's clock too: same machine)."""
    step = current_step()
    for index in range(count):
        await asyncio.sleep(gap)
        step.emit([index, time.time()])
    return count


@workflow
async def emit_paced(ctx: WorkflowContext, spec: dict[str, float]) -> int:
    """One step emitting `spec["count"]` chunks `spec["gap"]` seconds apart: how soon a reader
    following the stream gets each."""
    return int(await ctx.step("paced", _emit_paced, int(spec["count"]), spec["gap"]))


async def _emit_burst(count: int) -> int:
    """Emit `count` chunks as fast as history stores them: [index, emit time]. The SDK sends
    from this loop, so the body yields to it now and then, and waits a moment when as many
    chunks as the SDK buffers are not yet stored (a producer's back-pressure)."""
    step = current_step()
    for index in range(count):
        while True:
            try:
                step.emit([index, time.time()])
                break
            except StreamBufferFullError:
                await asyncio.sleep(0.001)
        if index % 100 == 99:
            await asyncio.sleep(0)
    return count


@workflow
async def emit_burst(ctx: WorkflowContext, count: int) -> int:
    """One step emitting `count` chunks in a row: the frames per second a reader sustains."""
    return int(await ctx.step("burst", _emit_burst, count))


_model = OfflineModel()


def _reply(conversation: list[dict[str, str]]) -> dict[str, Any]:
    return _model.chat({}, conversation)


@workflow
async def chat_turns(ctx: WorkflowContext, turns: int) -> int:
    """A chat of `turns` turns in one run: wait for "message", answer it with the offline model
    given the whole conversation, publish the reply (the chat agent example's turn)."""
    conversation: list[dict[str, str]] = []
    for _ in range(turns):
        message = await ctx.wait_for_signal("message")
        conversation.append({"role": "user", "text": str(message)})
        answer = await ctx.step("reply", _reply, conversation)
        conversation.append({"role": "assistant", "text": answer["text"]})
        await ctx.set_state("reply", answer)
    return turns


def _observe(step: int) -> dict[str, Any]:
    return {"step": step, "observation": f"tool output {step}", "done": False}


@workflow
async def autonomous_loop(ctx: WorkflowContext, steps: int) -> int:
    """An agent that acts `steps` times in a row in one run, keeping only its last
    observation."""
    last: dict[str, Any] = {}
    for step in range(steps):
        last = await ctx.step("act", _observe, step)
    return int(last.get("step", -1)) + 1


def _blob(size: int) -> str:
    return os.urandom(size // 2).hex()  # random: neither compressed nor stored once by content


@workflow
async def big_outputs(ctx: WorkflowContext, spec: dict[str, int]) -> int:
    """`spec["count"]` steps each returning `spec["size"]` bytes of text, none of them kept by
    the code."""
    for _ in range(spec["count"]):
        await ctx.step("blob", _blob, spec["size"], retry=QUICK_RETRY)
    return spec["count"]


@workflow
async def fair_run(ctx: WorkflowContext, hold: float) -> int:
    """One step that holds its worker slot `hold` seconds (a tenant's run, under fairness)."""

    def held() -> int:
        time.sleep(hold)
        return 1

    return int(await ctx.step("held", held))


@workflow
async def keyed_fan_out(ctx: WorkflowContext, spec: dict[str, Any]) -> int:
    """`count` remote steps `spec["step"]` at once, under `keys`, each with `estimate` units
    (0: none); how many completed, or -1 when a budget refused one."""
    estimate = Usage(units=spec["estimate"]) if spec.get("estimate") else None
    calls = [
        ctx.call(
            spec["step"], spec.get("input"), keys=spec["keys"], estimate=estimate, retry=QUICK_RETRY
        )
        for _ in range(spec["count"])
    ]
    try:
        return len(await ctx.gather(*calls))
    except BudgetExceededError:
        return -1


@remote_step
def tick(_: Any) -> int:
    """A remote step that does nothing: its grants are what a rate limit paces."""
    return 1


@remote_step
def spend(use: int) -> int:
    """A model call's stand-in: hold 50 ms, then report `use` units."""
    time.sleep(0.05)
    current_step().report_usage(units=use)
    return use
