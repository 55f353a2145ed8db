"""The workflow the telemetry tests follow: a step that fails once, a signal, a timer, and a
step that blocks until the test opens a gate (the place to kill its worker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perdure.worker import RetryPolicy, WorkflowContext, workflow
from tests.e2e.workflows import blocking, note


def flaky(ledger: str) -> str:
    """Fails on its first run, succeeds on the next."""
    if "flaky failed" not in (Path(ledger).read_text() if Path(ledger).exists() else ""):
        note(ledger, "flaky failed")
        raise RuntimeError("flaky fails once")
    return "fetched"


@workflow
async def traced(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """Every kind of span: a failed attempt and its retry, a signal, a timer, a long step."""
    fetched = await ctx.step("flaky", flaky, params["ledger"], retry=RetryPolicy(0.2))
    approval = await ctx.wait_for_signal("approve")
    await ctx.sleep(0.4)  # longer than a local wait: suspended, then granted ahead
    pid = await ctx.step("slow", blocking, params["ledger"], "slow", params["gate"])
    return {"fetched": fetched, "approval": approval, "slow_pid": pid}
