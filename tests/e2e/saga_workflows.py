"""Workflows the saga and standing-objective tests run (tests/e2e/test_sagas.py). Step bodies
append to a ledger the test owns, so the test counts executions across workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from perdure.worker import (
    RetryPolicy,
    Turn,
    TurnResult,
    WorkflowContext,
    remote_step,
    workflow,
)
from tests.e2e.workflows import counted, note, wait_for_file

QUICK_RETRY = RetryPolicy(initial_interval=0.2, maximum_attempts=3)


class OutOfStockError(Exception):
    """The shipping step's own error."""


def ship(ledger: str, order: str) -> None:
    """Fails for good: nothing is in stock."""
    note(ledger, f"ship {os.getpid()}")
    raise OutOfStockError(f"no stock for {order}")


def refund(ledger: str, marker: str) -> str:
    """A compensation whose first run kills its own worker (kill -9) before doing anything,
    leaving the marker file; every later run refunds."""
    note(ledger, f"start refund {os.getpid()}")
    if not Path(marker).exists():
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    note(ledger, f"refund {os.getpid()}")
    return "refunded"


@workflow
async def saga_trip(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Reserve, charge, ship in a saga; shipping fails, so the charge is refunded (the refund
    kills its worker the first time) and then the reservation released."""
    ledger, order = params["ledger"], params["order"]
    async with ctx.saga() as trip:
        await ctx.step("reserve", counted, ledger, "reserve", 1)
        trip.add_compensation("release", counted, ledger, "release", 1, retry=QUICK_RETRY)
        await ctx.step("charge", counted, ledger, "charge", 2)
        trip.add_compensation("refund", refund, ledger, params["marker"], retry=QUICK_RETRY)
        await ctx.step("ship", ship, ledger, order, retry=RetryPolicy(maximum_attempts=1))
    return "shipped"


@remote_step(name="search_turn")
def search_turn(work: dict[str, Any]) -> str:
    """One turn's work, as a model call would be: notes the turn, its objective and guidance,
    waits until the test opens the turn's gate, and returns what it found."""
    number, objective = work["turn"], work["objective"]
    note(work["ledger"], f"turn {number} {objective} {'; '.join(work['guidance'])}".rstrip())
    wait_for_file(f"{work['gates']}/{number}")
    return f"{objective} #{number}"


@workflow
async def standing_search(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """An agent loop whose turns are the remote step "search_turn"; it runs until a person
    abandons it (or 10 turns)."""

    async def take_turn(turn: Turn) -> TurnResult:
        work = {
            "turn": turn.number,
            "objective": turn.objective,
            "guidance": list(turn.guidance),
            "ledger": params["ledger"],
            "gates": params["gates"],
        }
        found = await ctx.call("search_turn", work)
        return TurnResult(state=[*(turn.state or []), found], units=1)

    result = await ctx.agent_loop(take_turn, objective=params["objective"], max_turns=10)
    return result.as_dict()
