"""Model calls as steps: a workflow asking a model through `ctx.model_call`, and the worker's
`model_step` answering it at known prices with the examples' client (offline, or the `openai`
package's for PERDURE_MODEL_URL)."""

from __future__ import annotations

import os
from typing import Any

from examples.models import MODEL_URL_ENV, model_client
from perdure.worker import (
    ModelPrices,
    Usage,
    WorkflowContext,
    current_step,
    model_step,
    model_text,
    remote_step,
    workflow,
)

MODEL = "offline-chat-1"
# USD 2.50 per million input tokens, 10.00 per million output tokens.
PRICES = ModelPrices(input_micros_per_million=2_500_000, output_micros_per_million=10_000_000)

# The test's switch to the `openai` package's async client: model_step awaits it on the
# worker's event loop instead of a thread.
ASYNC_CLIENT_ENV = "MODEL_WORKFLOWS_ASYNC_CLIENT"


def _client() -> Any:
    if not os.environ.get(ASYNC_CLIENT_ENV):
        return model_client()
    import openai

    return openai.AsyncOpenAI(base_url=os.environ[MODEL_URL_ENV], api_key="k")


answer_model_calls = model_step(_client(), {MODEL: PRICES})


def _ask(ctx: WorkflowContext, question: str, max_tokens: int) -> Any:
    messages = [
        {"role": "system", "content": "Answer in three sentences."},
        {"role": "user", "content": question},
    ]
    return ctx.model_call(model=MODEL, messages=messages, max_tokens=max_tokens, prices=PRICES)


@workflow
async def ask_the_model(ctx: WorkflowContext, input: dict[str, Any]) -> dict[str, Any]:
    """One model call, then two side by side; their texts and the usages the model reported."""
    max_tokens = int(input.get("max_tokens", 60))
    first = await _ask(ctx, input["question"], max_tokens)
    second, third = await ctx.gather(
        _ask(ctx, f"{input['question']} Why?", max_tokens),
        _ask(ctx, f"{input['question']} How?", max_tokens),
    )
    responses = [first, second, third]
    return {
        "texts": [model_text(response) for response in responses],
        "usages": [response["usage"] for response in responses],
        "models": [response["model"] for response in responses],
    }


# A count past 2**53, where a JSON number read as a double stops being exact, and the largest
# int64 cost: a step's report carried through the journal, the API and HTTP unchanged.
HUGE_UNITS = 2**53 + 1
HUGE_COST_MICROS = 2**63 - 1


@remote_step
async def report_huge_usage(input: Any) -> str:
    current_step().report_usage(units=HUGE_UNITS, cost_micros=HUGE_COST_MICROS, model=MODEL)
    return "reported"


@workflow
async def huge_usage(ctx: WorkflowContext) -> Any:
    """One remote step that reports HUGE_UNITS and HUGE_COST_MICROS."""
    return await ctx.call("report_huge_usage")


ONE = Usage(units=1, cost_micros=1)


@remote_step
async def report_all_the_units(input: Any) -> str:
    """Reports the largest int64 units and cost; its first attempt fails after reporting."""
    step = current_step()
    step.report_usage(units=HUGE_COST_MICROS, cost_micros=HUGE_COST_MICROS)
    if input.get("fail_first") and step.attempt == 1:
        raise RuntimeError("the first attempt fails after its report")
    return "reported"


@workflow
async def all_the_units(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
    """Reports of the largest int64 units and cost that add up past int64: two remote steps
    side by side, each reserving 1 (a budget's spent sums them), or with `retried` one step
    whose first attempt fails after its report (its usage sums its attempts)."""
    if input.get("retried"):
        return await ctx.call("report_all_the_units", {"fail_first": True}, estimate=ONE)
    return await ctx.gather(
        ctx.call("report_all_the_units", {}, estimate=ONE),
        ctx.call("report_all_the_units", {}, estimate=ONE),
    )
