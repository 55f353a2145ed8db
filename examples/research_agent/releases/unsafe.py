"""Release 2 as first written: `fact_check` added between the research and the analysis, for
every run, including those of release 1 that already analyzed (they no longer replay)."""

from __future__ import annotations

from typing import Any

from examples.research_agent.releases.review import checked
from examples.research_agent.workflow import RETRY, model_call, run_agent
from perdure.worker import WorkflowContext, workflow


@workflow(retry=RETRY)
async def research_agent(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Release 2, unguarded."""
    return await run_agent(ctx, params, checked)


# The model calls under a budget (model_tokens) are served by every release.
__all__ = ["model_call", "research_agent"]
