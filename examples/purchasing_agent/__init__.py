"""The purchasing agent example: child workflows, an approval with expiry and escalation, a
saga, and model calls under a budget, in one workflow.

    plan (model call) → a child run per vendor's quote → approval → saga: hold funds, place
    order, book delivery (compensated last first if one fails) → summary (model call)

`perdure dev` serves it beside the research agent. Start a run with `perdure workflow start
purchasing_agent --input '{"item": "a GPU server"}' --budget-units 2000`, decide its approval
with `perdure approvals list` and `perdure approve ID`, and watch it in `make demo`'s last
phase.

- `workflow`: the agent, its vendor child workflow, its saga's steps and its input;
- `suppliers`: the offline vendors and bank, each effect idempotent by key.
"""

from examples.purchasing_agent.workflow import (
    PurchaseInput,
    answer_model_calls,
    purchasing_agent,
    vendor_quote,
)

__all__ = ["PurchaseInput", "answer_model_calls", "purchasing_agent", "vendor_quote"]
