"""Workflows of the paged-journal tests: long runs of large outputs, and a run whose every
wake-up replays its journal through pages and payload references (its Node.js twin is
node_worker.mjs's `paged_replay`)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from perdure.worker import WorkflowContext, workflow
from tests.e2e.isolation_workflows import held
from tests.e2e.workflows import note

MIB = 1024 * 1024


def output(ledger: str, index: int, size: int) -> str:
    """A step body returning `size` bytes of text of its own (no two steps' are alike)."""
    note(ledger, f"output_{index} {os.getpid()}")
    return large_output(index, size)


def large_output(index: int, size: int) -> str:
    return f"{index}:".ljust(size, "x")


@workflow
async def long_outputs(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """`count` steps of `size` bytes of output each, the one at `hold` after a step that waits
    for the gate; the SHA-256 of the outputs as the code got them, recorded or new."""
    digest = hashlib.sha256()
    for index in range(params["count"]):
        if index == params["hold"]:
            await ctx.step("held", held, params["ledger"], params["gate"])
        value = await ctx.step(f"output_{index}", output, params["ledger"], index, params["size"])
        digest.update(value.encode())
    return digest.hexdigest()


def part(index: int, size: int) -> str:
    """Step outputs alternately over and under the payload reference size."""
    return f"{index}:".ljust(size if index % 2 == 0 else 20, chr(97 + index % 26))


@workflow
async def paged_replay(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """Steps, published state, a signal and a durable sleep: each wake-up replays the journal,
    its recorded values coming back through pages and payload references."""
    parts = [await ctx.step(f"part_{i}", part, i, params["size"]) for i in range(params["count"])]
    await ctx.set_state("parts", len(parts))
    message = await ctx.wait_for_signal("go")
    await ctx.sleep(1.0)
    return {
        "parts": [hashlib.sha256(p.encode()).hexdigest()[:12] for p in parts],
        "sizes": [len(p) for p in parts],
        "message": message,
    }
