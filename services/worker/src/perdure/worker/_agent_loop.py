"""Standing objectives: a durable agent loop that people steer with signals, and that stops
with a reason when its objective is met, it is abandoned, or its turns or budget run out
(worker-protocol.md §31)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from perdure.worker._context import WorkflowContext, _check_name

StopReason = Literal["met", "abandoned", "out_of_budget", "max_turns"]


@dataclass(frozen=True)
class Turn:
    """What a turn works from: the objective as steered so far, the state the last turn left
    (None before the first), every piece of guidance people sent, oldest first, and the units
    spent so far."""

    number: int  # from 1, counted across continue_as_new
    objective: Any
    state: Any
    guidance: tuple[Any, ...]
    spent: int

    def carry(self) -> dict[str, Any]:
        """The loop as it stands before this turn, for `resume=` in the next run: pass it on
        with `ctx.continue_as_new`, and the next run does this turn afresh."""
        return {
            "objective": self.objective,
            "state": self.state,
            "turns": self.number - 1,
            "spent": self.spent,
            "guidance": list(self.guidance),
        }


@dataclass(frozen=True)
class TurnResult:
    """What a turn returns: the new state (JSON, from journaled values) and the units it used
    (tokens, calls: whatever the budget counts)."""

    state: Any
    units: int = 0


@dataclass(frozen=True)
class AgentLoopResult:
    """How the loop ended: `reason` one of "met", "abandoned", "out_of_budget", "max_turns";
    the turns taken, the objective last steered to, the last turn's state, units spent, and
    the guidance received."""

    reason: StopReason
    turns: int
    objective: Any
    state: Any
    spent: int
    guidance: tuple[Any, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON (a workflow's result, say)."""
        return {
            "reason": self.reason,
            "turns": self.turns,
            "objective": self.objective,
            "state": self.state,
            "spent": self.spent,
            "guidance": list(self.guidance),
        }


async def run_agent_loop(
    ctx: WorkflowContext,
    take_turn: Callable[[Turn], Awaitable[TurnResult]],
    *,
    objective: Any,
    max_turns: int,
    is_met: Callable[[Any], bool] | None = None,
    budget: int | None = None,
    steering_signal: str = "steer",
    abandon_signal: str = "abandon",
    state_key: str = "objective",
    resume: dict[str, Any] | None = None,
) -> AgentLoopResult:
    """Run `take_turn` until the objective is met or the loop must stop; see
    WorkflowContext.agent_loop."""
    _check_options(take_turn, max_turns, is_met, budget)
    _check_name(steering_signal, "steering_signal")
    _check_name(abandon_signal, "abandon_signal")
    loop = _Loop.start(objective, resume)
    while True:
        reason = await _stop_reason(ctx, loop, abandon_signal, is_met, budget, max_turns)
        if reason is not None:
            await ctx.set_state(state_key, loop.published(reason, budget, max_turns))
            return loop.result(reason)
        loop.steer(await ctx.drain_signals(steering_signal))
        await ctx.set_state(state_key, loop.published("running", budget, max_turns))
        done = await take_turn(loop.turn())
        if not isinstance(done, TurnResult):
            raise TypeError(f"a turn must return a TurnResult, not {done!r}")
        _check_units(done.units)
        loop.turns += 1
        loop.spent += done.units
        loop.state = done.state


@dataclass
class _Loop:
    """The loop's running values: all from journaled values, so a replay rebuilds them."""

    objective: Any
    state: Any
    turns: int
    spent: int
    guidance: list[Any]

    @classmethod
    def start(cls, objective: Any, resume: dict[str, Any] | None) -> _Loop:
        if resume is None:
            return cls(objective, None, 0, 0, [])
        if not isinstance(resume, dict):
            raise TypeError(f"resume takes what Turn.carry() gave, not {resume!r}")
        turns, spent = resume.get("turns", 0), resume.get("spent", 0)
        if not (isinstance(turns, int) and turns >= 0 and isinstance(spent, int) and spent >= 0):
            raise ValueError(f"resume needs whole turns and spent >= 0: {resume!r}")
        guidance = list(resume.get("guidance") or [])
        return cls(resume.get("objective", objective), resume.get("state"), turns, spent, guidance)

    def steer(self, messages: list[Any]) -> None:
        """Take people's steering, oldest first: {"objective": ...} replaces the objective,
        {"guidance": ...} adds guidance (a message may hold both); any other value is a new
        objective."""
        for message in messages:
            if isinstance(message, dict) and ("objective" in message or "guidance" in message):
                if "objective" in message:
                    self.objective = message["objective"]
                if "guidance" in message:
                    self.guidance.append(message["guidance"])
            else:
                self.objective = message

    def turn(self) -> Turn:
        guidance = tuple(self.guidance)
        return Turn(self.turns + 1, self.objective, self.state, guidance, self.spent)

    def published(self, status: str, budget: int | None, max_turns: int) -> dict[str, Any]:
        """What DescribeWorkflow shows under the loop's state key."""
        return {
            "objective": self.objective,
            "status": status,
            "turns": self.turns,
            "max_turns": max_turns,
            "spent": self.spent,
            "budget": budget,
        }

    def result(self, reason: StopReason) -> AgentLoopResult:
        guidance = tuple(self.guidance)
        return AgentLoopResult(reason, self.turns, self.objective, self.state, self.spent, guidance)


async def _stop_reason(
    ctx: WorkflowContext,
    loop: _Loop,
    abandon_signal: str,
    is_met: Callable[[Any], bool] | None,
    budget: int | None,
    max_turns: int,
) -> StopReason | None:
    """Between turns, in this order: a person abandoned it, the objective is met (after a
    turn), the budget is spent, the turns are used up."""
    if await ctx.drain_signals(abandon_signal):
        return "abandoned"
    if is_met is not None and loop.turns > 0 and is_met(loop.state):
        return "met"
    if budget is not None and loop.spent >= budget:
        return "out_of_budget"
    if loop.turns >= max_turns:
        return "max_turns"
    return None


def _check_options(take_turn: Any, max_turns: Any, is_met: Any, budget: Any) -> None:
    if not callable(take_turn):
        raise TypeError(f"take_turn must be an async function, not {take_turn!r}")
    if is_met is not None and not callable(is_met):
        raise TypeError(f"is_met must be a function of the state, not {is_met!r}")
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ValueError(f"max_turns must be a whole number >= 1, not {max_turns!r}")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 0
    ):
        raise ValueError(f"budget must be a whole number of units >= 0 or None, not {budget!r}")


def _check_units(units: Any) -> None:
    if not isinstance(units, int) or isinstance(units, bool) or units < 0:
        raise ValueError(f"a turn's units must be a whole number >= 0, not {units!r}")
