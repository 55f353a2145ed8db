"""Workflows the end-to-end tests run. Each step appends a line to a ledger file the test owns,
so the test can count executions across processes."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from perdure.worker import RetryPolicy, StepFailedError, WorkflowContext, current_step, workflow

GATE_TIMEOUT = 120.0


def note(ledger: str, line: str) -> None:
    """Append one line to the ledger (O_APPEND: whole lines even from several processes)."""
    with open(ledger, "a", encoding="utf-8") as sink:
        sink.write(f"{line}\n")


def counted(ledger: str, name: str, value: int) -> int:
    """A step body: record that it ran, in which process, and return a value."""
    note(ledger, f"{name} {os.getpid()}")
    return value


def wait_for_file(gate: str) -> None:
    """Block until the test creates the gate file (or fail after GATE_TIMEOUT)."""
    deadline = time.monotonic() + GATE_TIMEOUT
    while not Path(gate).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {gate} never opened")
        time.sleep(0.02)


def blocking(ledger: str, name: str, gate: str) -> int:
    """A step body that records its start, then waits until the test creates the gate file."""
    note(ledger, f"start {name} {os.getpid()}")
    wait_for_file(gate)
    note(ledger, f"{name} {os.getpid()}")
    return os.getpid()


@workflow
async def five_steps(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """Five steps whose results feed each other."""
    ledger = params["ledger"]
    total = 0
    for index in range(1, 6):
        total += await ctx.step(f"step_{index}", counted, ledger, f"step_{index}", index * 10)
    return {"total": total, "key": ctx.workflow_id}


@workflow
async def blocks_in_third(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """Two quick steps, a third that waits for a gate, then a fourth."""
    ledger, gate = params["ledger"], params["gate"]
    one = await ctx.step("step_1", counted, ledger, "step_1", 1)
    two = await ctx.step("step_2", counted, ledger, "step_2", 2)
    holder = await ctx.step("step_3", blocking, ledger, "step_3", gate)
    four = await ctx.step("step_4", counted, ledger, "step_4", 4)
    return {"sum": one + two + four, "step_3_pid": holder, "fence": ctx.fence}


@workflow
async def loop_agent(ctx: WorkflowContext, params: dict[str, Any]) -> list[str]:
    """Calls the same step several times, as an agent loop does."""
    return [
        await ctx.step("model", lambda: current_step().idempotency_key)
        for _ in range(params["turns"])
    ]


@workflow
async def version_switch(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Deliberately non-deterministic: its first step's name comes from a file, as if the code
    had been changed between a crash and the replay."""
    name = Path(params["version_file"]).read_text().strip()  # noqa: ASYNC240 (a tiny file)
    await ctx.step(name, counted, params["ledger"], name, 1)
    await ctx.step("wait", blocking, params["ledger"], "wait", params["gate"])
    return "done"


def explode(message: str) -> None:
    """A step body that always fails."""
    raise ValueError(message)


@workflow
async def fails(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """A step fails; the workflow notes it (compensation) and fails itself."""
    try:
        await ctx.step(
            "charge",
            explode,
            "card declined",
            retry=RetryPolicy(non_retryable_error_types=("ValueError",)),
        )
    except StepFailedError as error:
        await ctx.step("compensate", counted, params["ledger"], "compensate", 0)
        raise RuntimeError(f"charge failed: {error.error_type}: {error.message}") from error
    return "unreachable"


@workflow
async def clock(ctx: WorkflowContext) -> dict[str, str]:
    """Uses recorded values: replay must see the same instant and id."""
    moment = await ctx.now()
    ident = await ctx.uuid4()
    return {"now": moment.isoformat(), "uuid": ident}


def oversized(ledger: str) -> str:
    """A step body whose result is over history's payload limit (2 MiB)."""
    note(ledger, f"oversized {os.getpid()}")
    return "x" * (3 * 1024 * 1024)


@workflow
async def oversized_result(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """A step whose result history refuses, caught; then a result history refuses too."""
    try:
        await ctx.step("oversized", oversized, params["ledger"])
    except StepFailedError as error:
        caught = error.message
    await ctx.step("after", counted, params["ledger"], "after", 1)
    return {"caught": caught, "padding": "y" * (3 * 1024 * 1024)}
