"""Workflows the client tests run (tests/e2e/test_client.py): exact result values, a failure,
a wait for a signal, and a step that streams text, its first attempt failing mid-stream."""

from __future__ import annotations

from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, current_step, workflow
from tests.e2e.workflows import wait_for_file

# The values a result must bring back exactly: ints stay ints (2**70 too), floats floats.
EXACT = {"int": 3, "big": 2**70, "float": 1.5, "nested": [{"a": [1, 2]}, None, True, "é"]}
FAST_RETRY = RetryPolicy(initial_interval=0.05, maximum_attempts=3)


def make_values(params: Any) -> dict[str, Any]:
    return {**EXACT, "echo": params}


@workflow
async def exact_values(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Returns EXACT and its input, made by a step (so through the journal)."""
    made: dict[str, Any] = await ctx.step("make", make_values, params)
    return made


@workflow
async def refuses(ctx: WorkflowContext, params: Any) -> None:
    """Fails the run with a ValueError."""
    raise ValueError(f"cannot use {params!r}")


@workflow
async def waits_for_go(ctx: WorkflowContext) -> Any:
    """Returns the payload of signal "go"."""
    return await ctx.wait_for_signal("go")


def spoken(index: int) -> str:
    return f"w{index} "


def talk(gate: str, chunks: int) -> str:
    """Emits `chunks` words, waits for the gate, emits as many again; its first attempt emits
    a few words of its own and fails (so readers see a reset)."""
    step = current_step()
    if step.attempt == 1:
        for index in range(3):
            step.emit(f"dead{index} ")
        raise ConnectionError("the model dropped the connection")
    for index in range(chunks):
        step.emit(spoken(index))
    wait_for_file(gate)
    for index in range(chunks, 2 * chunks):
        step.emit(spoken(index))
    return "spoken"


@workflow
async def streams_text(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """One streaming step ("talk"), retried once."""
    said: str = await ctx.step("talk", talk, params["gate"], params["chunks"], retry=FAST_RETRY)
    return said
