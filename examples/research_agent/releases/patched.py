"""Release 2 made safe: the fact check only for runs that reach it on this code
(`ctx.patched`); a run of release 1 that went past the research keeps release 1's path."""

from __future__ import annotations

from typing import Any

from examples.research_agent.releases.review import PATCH, checked
from examples.research_agent.workflow import RETRY, AgentInput, model_call, run_agent
from perdure.worker import WorkflowContext, workflow


async def _review(
    ctx: WorkflowContext, spec: AgentInput, notes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    if ctx.patched(PATCH):
        return await checked(ctx, spec, notes)
    return notes  # release 1's path, for the runs that took it


@workflow(retry=RETRY)
async def research_agent(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Release 2, behind the patch `fact-check`."""
    return await run_agent(ctx, params, _review)


# The model calls under a budget (model_tokens) are served by every release.
__all__ = ["model_call", "research_agent"]
