"""The research agent example: an AI-style agent whose every model call is a durable step.

    create_plan → research_1 → research_2 → analyze → recommend → approval → report → notify

`perdure dev` serves it (`perdure worker --module examples.research_agent`). Start a run with
`python -m examples.research_agent start --topic T [fault switches]`, approve it with
`perdure approve ID`, and watch the whole story with `make demo`
(`python -m examples.research_agent.demo`).

- `workflow`: the workflow, its input and its fault switches;
- `model`: the offline, deterministic model provider;
- `notifications`: the reservation table that sends the report exactly once;
- `demo`: the narrated walk-through against a fresh local cluster.
"""

from examples.research_agent.notifications import count_delivered, delivered_notifications
from examples.research_agent.workflow import STEPS, AgentInput, model_call, research_agent

__all__ = [
    "STEPS",
    "AgentInput",
    "count_delivered",
    "delivered_notifications",
    "model_call",
    "research_agent",
]
