"""Workflows the resume, reset and fork tests run (tests/e2e/test_recovery.py). Each step
appends to a ledger the test owns, so the test counts executions across workers."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from perdure.worker import WorkflowContext, workflow
from tests.e2e.workflows import GATE_TIMEOUT, counted, note


def held(ledger: str, name: str, hold: str, value: int) -> int:
    """A step body that records its start, waits while the test keeps the hold file, then
    records that it ran and returns `value`."""
    note(ledger, f"start {name} {os.getpid()}")
    deadline = time.monotonic() + GATE_TIMEOUT
    while Path(hold).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"hold {hold} never released")
        time.sleep(0.02)
    note(ledger, f"{name} {os.getpid()}")
    return value


@workflow
async def adding(ctx: WorkflowContext, params: dict[str, Any]) -> list[int]:
    """Four steps, each adding its number to the output of the one before: a recorded output
    replaced (a fork's override) changes every step after it, and the result."""
    total, outputs = params["start"], []
    for k in range(1, 5):
        name = f"add_{k}"
        total = await ctx.step(name, held, params["ledger"], name, params["hold"], total + k)
        outputs.append(total)
    return outputs


@workflow
async def drifting_order(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """ "first", a wait for "go", then "second"; while the version file says "reordered", the
    code calls "second" before "first" (a deploy that changed the order of recorded calls)."""
    ledger = params["ledger"]
    version = Path(params["version_file"]).read_text().strip()  # noqa: ASYNC240 (tiny)
    if version == "reordered":
        await ctx.step("second", counted, ledger, "second", 2)
    first = await ctx.step("first", counted, ledger, "first", 1)
    await ctx.wait_for_signal("go")
    second = await ctx.step("second", counted, ledger, "second", 2)
    return f"{first}+{second}"
