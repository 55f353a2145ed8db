"""Workflows for the lease tests: a sync step that never returns."""

from __future__ import annotations

import threading
from pathlib import Path

from perdure.worker import WorkflowContext, workflow


def hang(started: str) -> None:
    """Note that the body started, then never return (a thread cannot be stopped)."""
    Path(started).touch()
    threading.Event().wait()


@workflow
async def hangs_in_sync_step(ctx: WorkflowContext, started: str) -> None:
    """One sync step that hangs forever."""
    await ctx.step("hang", hang, started)
