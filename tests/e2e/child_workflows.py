"""Parents and children for tests/e2e/test_children.py. Each child that runs appends a JSON line
to the ledger named in its input (the workflow id, run id and what happened), so a test can
count how often a child really ran."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from perdure.worker import (
    ChildWorkflowFailedError,
    RetryPolicy,
    WorkflowCancelledError,
    WorkflowContext,
    workflow,
)

FAST_RETRY = RetryPolicy(initial_interval=0.1, backoff_coefficient=1.0, maximum_attempts=5)


def note(ledger: str | None, **line: Any) -> None:
    if ledger:
        with Path(ledger).open("a") as out:
            out.write(json.dumps(line) + "\n")


@workflow
async def adder(ctx: WorkflowContext, input: dict[str, Any]) -> int:
    """A child: notes that it ran, then returns a + b."""

    def noted() -> None:
        note(input.get("ledger"), child=ctx.workflow_id, run=ctx.info.run_id, kind="ran")

    await ctx.step("note", noted)
    return int(input["a"]) + int(input["b"])


@workflow
async def failing_child(ctx: WorkflowContext, input: dict[str, Any]) -> None:
    """A child that fails with its own error."""
    raise ValueError(f"child refuses {input['what']}")


@workflow
async def waiting_child(ctx: WorkflowContext, input: dict[str, Any]) -> str:
    """A child that waits for signal "go"; notes a cancellation when it gets one."""
    try:
        await ctx.wait_for_signal("go")
    except WorkflowCancelledError:
        await ctx.step(
            "saw-cancel", lambda: note(input.get("ledger"), child=ctx.workflow_id, kind="cancelled")
        )
        raise
    return "went"


@workflow
async def parent_adds(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Runs one adder child (on `child_queue`, default this run's); with `kill_marker`, the
    worker dies right after the child call is journaled, the first time only (the marker file
    says it happened)."""
    handle = await ctx.start_child(
        "adder",
        {"a": 2, "b": 3, "ledger": input.get("ledger")},
        task_queue=input.get("child_queue"),
    )
    marker = input.get("kill_marker")

    def maybe_die() -> None:
        if marker and not Path(marker).exists():
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)

    await ctx.step("after-start", maybe_die, retry=FAST_RETRY)
    total = await handle.result()
    return {"total": total, "child": handle.workflow_id, "child_run": handle.run_id}


@workflow
async def parent_of_two(ctx: WorkflowContext, input: dict[str, Any]) -> list[int]:
    """Two adder children side by side, gathered."""
    first = await ctx.start_child("adder", {"a": 1, "b": 1}, id=input["ids"][0])
    second = await ctx.start_child("adder", {"a": 2, "b": 2}, id=input["ids"][1])
    return await ctx.gather(first, second)


@workflow
async def parent_of_many(ctx: WorkflowContext, input: dict[str, Any]) -> list[int]:
    """`count` adder children, started one after another (each noting its run in `ledger`),
    then gathered."""
    handles = [
        await ctx.start_child("adder", {"a": n, "b": 0, "ledger": input["ledger"]})
        for n in range(input["count"])
    ]
    return await ctx.gather(*handles)


@workflow
async def parent_catches(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Runs a failing child and reports the error it raised here."""
    try:
        await ctx.child("failing_child", {"what": "this"})
    except ChildWorkflowFailedError as error:
        return {
            "type": error.error_type,
            "message": error.message,
            "status": error.status,
            "child": error.workflow_id,
            "run": error.run_id,
        }
    return {"type": None}


@workflow
async def parent_leaves(ctx: WorkflowContext, input: dict[str, Any]) -> str:
    """Starts a waiting child under `policy`, then waits for signal "finish" and completes
    (or fails, with `fail`), leaving the child open."""
    await ctx.start_child(
        "waiting_child",
        {"ledger": input.get("ledger")},
        id=input["child_id"],
        parent_close_policy=input["policy"],
    )
    await ctx.wait_for_signal("finish")
    if input.get("fail"):
        raise RuntimeError("the parent fails")
    return "parent done"


@workflow
async def parent_waits_for_child(ctx: WorkflowContext, input: dict[str, Any]) -> str:
    """Waits for a waiting child. A cancellation of this run reaches the child too; cancelled,
    this run waits for the child to finish its own cancellation before it ends (else its close
    would terminate the child first)."""
    child = await ctx.start_child(
        "waiting_child", {"ledger": input.get("ledger")}, id=input["child_id"]
    )
    try:
        return str(await child.result())
    except WorkflowCancelledError:
        try:
            await child.result()
        except ChildWorkflowFailedError as error:
            await ctx.set_state("child", {"status": error.status, "type": error.error_type})
        raise


@workflow
async def parent_reuses_id(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """Starts a child under an id an open run holds: the call fails at once."""
    try:
        await ctx.child("adder", {"a": 1, "b": 1}, id=input["child_id"])
    except ChildWorkflowFailedError as error:
        return {"type": error.error_type, "run": error.run_id}
    return {"type": None}
