"""usage_from_model_response and report_model_usage: tokens and their cost from an
OpenAI-compatible response, in exact integers rounded up, at any size."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.worker import ModelPrices, Usage, remote_step, report_model_usage
from perdure.worker import usage_from_model_response as usage_of
from tests.unit.worker.test_flow_control import StepSession, _loaded, _task, _task_done

# USD 2.50 per million input tokens, USD 10 per million output tokens.
PRICES = {
    "input_price_micros_per_million": 2_500_000,
    "output_price_micros_per_million": 10_000_000,
}


def test_units_are_the_total_and_each_cost_is_rounded_up() -> None:
    response = {
        "usage": {
            "prompt_tokens": 1_000_003,
            "completion_tokens": 250_001,
            "total_tokens": 1_250_010,
        }
    }
    # 1,000,003 x 2.5 = 2,500,007.5 -> 2,500,008; 250,001 x 10 = 2,500,010.
    assert usage_of(response, **PRICES) == Usage(units=1_250_010, cost_micros=5_000_018)


def test_without_a_total_units_are_prompt_plus_completion() -> None:
    response = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=7, completion_tokens=3))
    # 7 x 2.5 = 17.5 -> 18; 3 x 10 = 30.
    assert usage_of(response, **PRICES) == Usage(units=10, cost_micros=48)


def test_a_fraction_of_a_micro_costs_a_whole_one() -> None:
    response = {"usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}}
    assert usage_of(
        response, input_price_micros_per_million=1, output_price_micros_per_million=1
    ) == Usage(units=1, cost_micros=1)
    free = {"usage": {"prompt_tokens": 5, "completion_tokens": 5}}
    assert usage_of(
        free, input_price_micros_per_million=0, output_price_micros_per_million=0
    ) == Usage(units=10, cost_micros=0)


def test_numbers_past_2_to_the_53_stay_exact() -> None:
    response = {
        "usage": {
            "prompt_tokens": 2**60,
            "completion_tokens": 2**55 + 1,
            "total_tokens": 2**60 + 2**55 + 1,
        }
    }
    usage = usage_of(response, input_price_micros_per_million=3, output_price_micros_per_million=7)
    # 2**60 x 3 / 1e6 = 3,458,764,513,820.540928 -> ...821; (2**55 + 1) x 7 / 1e6 =
    # 252,201,579,132.747783 -> ...133.
    assert usage == Usage(units=1_188_950_301_625_810_945, cost_micros=3_710_966_092_954)


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        ({}, ValueError, "has no usage"),
        ({"usage": {"prompt_tokens": -1}}, ValueError, "usage.prompt_tokens must be >= 0"),
        ({"usage": {"prompt_tokens": "12"}}, TypeError, "usage.prompt_tokens must be an int"),
    ],
)
def test_a_response_without_whole_token_counts_is_refused(
    response: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        usage_of(response, **PRICES)


def test_prices_are_whole_micros() -> None:
    with pytest.raises(TypeError, match="input_micros_per_million must be an int"):
        ModelPrices(input_micros_per_million=2.5, output_micros_per_million=1)  # type: ignore[arg-type]


@remote_step(name="chat")
async def priced_chat(prompt: Any) -> str:
    response = {"usage": {"prompt_tokens": 1_000_003, "completion_tokens": 250_001}}
    report_model_usage(response, ModelPrices(2_500_000, 10_000_000))
    return "hi"


async def test_report_model_usage_reports_from_a_step_handler() -> None:
    done = await _task_done(StepSession(_loaded("chat")), _task(), steps=[priced_chat])
    assert done.usage == fpb.Usage(units=1_250_004, cost_micros=5_000_018)
