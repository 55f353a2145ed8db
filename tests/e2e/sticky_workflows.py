"""Workflows of the sticky execution tests: a chat loop that marks in a ledger each point its
code passes outside steps, and each step body run, with the worker that ran it, so a test can
tell a resumed run (each point once) from a replayed one (the points before again)."""

from __future__ import annotations

import os
from typing import Any

from perdure.worker import WorkflowContext, workflow


def mark(ledger: str, what: str) -> None:
    """Append "<what> <worker identity>" to the ledger."""
    with open(ledger, "a") as sink:
        sink.write(f"{what} {os.environ.get('PERDURE_WORKER_IDENTITY', '?')}\n")


def _reply(ledger: str, turn: int, message: str, pad: int) -> str:
    mark(ledger, f"step-{turn}")
    return f"{turn}:{message}" + "." * pad


@workflow
async def chat(ctx: WorkflowContext, args: dict[str, Any]) -> list[str]:
    """`turns` turns, each waiting for a signal "message" and answering it with a step (whose
    result carries `pad` more bytes, for the journal to grow)."""
    ledger, pad = args["ledger"], args.get("pad", 0)
    mark(ledger, "start")
    replies = []
    for turn in range(args["turns"]):
        message = await ctx.wait_for_signal("message")
        mark(ledger, f"turn-{turn}")
        reply = await ctx.step("reply", _reply, ledger, turn, message, pad)
        replies.append(reply[: len(reply) - pad])
    return replies
