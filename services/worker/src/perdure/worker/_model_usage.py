"""Usage from an OpenAI-compatible model response: tokens, and their cost at per-million
prices, in exact integers (a float would round a large bill)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perdure.worker._attempt import current_step
from perdure.worker._flow import Usage, check_amount

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class ModelPrices:
    """A model's prices in millionths of a currency per million tokens (USD 2.50 per million
    input tokens: input_micros_per_million=2_500_000)."""

    input_micros_per_million: int
    output_micros_per_million: int

    def __post_init__(self) -> None:
        check_amount("input_micros_per_million", self.input_micros_per_million)
        check_amount("output_micros_per_million", self.output_micros_per_million)


def usage_from_model_response(
    response: Any,
    *,
    input_price_micros_per_million: int,
    output_price_micros_per_million: int,
) -> Usage:
    """The usage of one model call, from `response.usage` (an object or a dict, with
    prompt_tokens, completion_tokens and total_tokens): units are the total tokens (prompt +
    completion when the total is missing), cost_micros the prompt tokens at the input price plus
    the completion tokens at the output price, each rounded up to a whole micro."""
    prices = ModelPrices(input_price_micros_per_million, output_price_micros_per_million)
    usage = _field(response, "usage")
    if usage is None:
        raise ValueError("the model response has no usage")
    prompt = _tokens(usage, "prompt_tokens")
    completion = _tokens(usage, "completion_tokens")
    total = _field(usage, "total_tokens")
    units = prompt + completion if total is None else _tokens(usage, "total_tokens")
    cost = tokens_cost(prompt, prices.input_micros_per_million) + tokens_cost(
        completion, prices.output_micros_per_million
    )
    return Usage(units=units, cost_micros=cost)


def report_model_usage(response: Any, prices: ModelPrices) -> Usage:
    """From inside a remote step's handler: report the usage of a model call's `response` at
    `prices` (as usage_from_model_response), with the model it names, and return it. Replaces
    an earlier report: sum the usages of several calls and report once with
    current_step().report_usage()."""
    usage = usage_from_model_response(
        response,
        input_price_micros_per_million=prices.input_micros_per_million,
        output_price_micros_per_million=prices.output_micros_per_million,
    )
    model = _field(response, "model")
    current_step().report_usage(
        units=usage.units,
        cost_micros=usage.cost_micros,
        model=model if isinstance(model, str) else "",
    )
    return usage


def tokens_cost(tokens: int, micros_per_million: int) -> int:
    """ceil(tokens * price / 1,000,000), in integers."""
    return -(-tokens * micros_per_million // PER_MILLION)


def _tokens(usage: Any, name: str) -> int:
    value = _field(usage, name)
    return 0 if value is None else check_amount(f"usage.{name}", value)


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)
