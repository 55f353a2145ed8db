"""Workflows under flow control, and the remote steps a Python worker serves for them. Each step
body appends a JSON line to the ledger named in its input: when it began and ended (this
host's clock, for overlaps only), what it was granted and what it reported."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from perdure.worker import (
    BudgetExceededError,
    RetryPolicy,
    Usage,
    WorkflowContext,
    current_step,
    remote_step,
    workflow,
)

FAST_RETRY = RetryPolicy(initial_interval=0.2, backoff_coefficient=1.0, maximum_attempts=20)


def _note(ledger: str, **line: Any) -> None:
    step = current_step()
    line.update(workflow_id=step.workflow_id, step_id=step.step_id, fence=step.fence)
    line["identity"] = os.environ.get("PERDURE_WORKER_IDENTITY", str(os.getpid()))
    with Path(ledger).open("a") as out:
        out.write(json.dumps(line) + "\n")


@workflow
async def keyed_run(ctx: WorkflowContext, input: dict[str, Any]) -> str:
    """Hold the run's workflow task for `hold` seconds inside one step (a run executing)."""

    def hold() -> str:
        began = time.time()
        time.sleep(input["hold"])
        _note(input["ledger"], began=began, ended=time.time())
        return "held"

    return str(await ctx.step("hold", hold))


@workflow
async def fan_out(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Call `count` remote `spend` steps at once, each declaring `estimate` units under
    `keys`; say whether a budget refused one."""
    calls = [
        ctx.call(
            "spend",
            {"ledger": input["ledger"], "use": input["use"], "hold": input.get("hold", 0)},
            task_queue=input.get("queue"),
            retry=FAST_RETRY,
            keys=input.get("keys", []),
            estimate=Usage(units=input["estimate"]),
        )
        for _ in range(input["count"])
    ]
    try:
        return {"done": len(await ctx.gather(*calls)), "refused": False}
    except BudgetExceededError:
        return {"done": None, "refused": True}


@workflow
async def spend_until_refused(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Call the `spend` step again and again until a budget refuses it."""
    spent = 0
    while True:
        try:
            await ctx.call(
                "spend",
                {"ledger": input["ledger"], "use": input["use"]},
                retry=FAST_RETRY,
                estimate=Usage(units=input["estimate"]),
            )
        except BudgetExceededError as refused:
            return {"steps": spent, "refused": str(refused)}
        spent += 1


@remote_step
def spend(input: dict[str, Any]) -> str:
    """Use `use` units (reported), after holding `hold` seconds."""
    began = time.time()
    time.sleep(input.get("hold", 0))
    current_step().report_usage(units=input["use"])
    _note(input["ledger"], began=began, ended=time.time(), used=input["use"])
    return "spent"
