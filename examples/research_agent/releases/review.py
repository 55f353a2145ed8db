"""Release 2's new step: each research note is checked before the analysis uses it."""

from __future__ import annotations

from typing import Any

from examples.research_agent.workflow import AgentInput
from perdure.worker import WorkflowContext

PATCH = "fact-check"


def fact_check(spec: AgentInput, notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notes, each marked as checked (offline: every finding stands)."""
    return [{**note, "checked": True} for note in notes]


async def checked(
    ctx: WorkflowContext, spec: AgentInput, notes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Release 2's review of the research: the `fact_check` step."""
    result: list[dict[str, Any]] = await ctx.step("fact_check", fact_check, spec, notes)
    return result
