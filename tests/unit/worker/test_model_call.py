"""A model call's request, its estimate's bound, and model_step's answer to any
OpenAI-compatible client (sync or async, dict or pydantic-like responses)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from examples.models import OfflineClient
from perdure.worker import ModelPrices
from perdure.worker._attempt import StepContext, _current_step, _current_usage
from perdure.worker._model_call import (
    model_estimate,
    model_request,
    model_step,
    model_text,
    prompt_tokens_bound,
)
from perdure.worker._usage import UsageReport

PRICES = ModelPrices(input_micros_per_million=2_500_000, output_micros_per_million=10_000_000)
HELLO = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("model", "messages", "max_tokens", "params", "error", "says"),
    [
        ("", HELLO, 10, {}, ValueError, "model must name the model"),
        ("m\n1", HELLO, 10, {}, ValueError, "printable"),
        ("m", [], 10, {}, TypeError, "non-empty list"),
        ("m", "Hi", 10, {}, TypeError, "non-empty list"),
        ("m", [{"content": "Hi"}], 10, {}, TypeError, "messages[0]"),
        ("m", HELLO, 0, {}, ValueError, "from 1 to"),
        ("m", HELLO, 2**31, {}, ValueError, "from 1 to"),
        ("m", HELLO, True, {}, TypeError, "max_tokens must be an int"),
        ("m", HELLO, 10, {"stream": True}, ValueError, "stream cannot be passed"),
        ("m", HELLO, 10, {"temperature": object()}, TypeError, "not JSON serializable"),
    ],
)
def test_a_request_a_provider_would_refuse_is_refused_before_it_is_journaled(
    model: str,
    messages: Any,
    max_tokens: Any,
    params: dict[str, Any],
    error: type[Exception],
    says: str,
) -> None:
    with pytest.raises(error) as raised:
        model_request(model, messages, max_tokens, params)
    assert says in str(raised.value)


def test_the_estimate_bounds_what_the_offline_model_reports_for_every_prompt() -> None:
    client = OfflineClient()
    for text in ["Hi", "é" * 50, "one two  three\nfour", "", "long " * 400]:
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
        for max_tokens in (1, 5, 200):
            request = model_request("m", messages, max_tokens, {})
            response = client.chat.completions.create(**{**request, **request["params"]})
            estimate = model_estimate(request, PRICES)
            usage = response["usage"]
            assert usage["completion_tokens"] <= max_tokens
            assert usage["total_tokens"] <= estimate.units
            cost = -(-usage["prompt_tokens"] * 2_500_000 // 10**6) + -(
                -usage["completion_tokens"] * 10_000_000 // 10**6
            )
            assert cost <= estimate.cost_micros


def test_the_prompt_bound_counts_utf8_bytes_of_compact_json() -> None:
    # "user" is 6 bytes as JSON, "é" 2 bytes plus 2 quotes; 4 per message, 3 per reply.
    assert prompt_tokens_bound([{"role": "user", "content": "é"}]) == 6 + 4 + 4 + 3
    assert model_estimate(model_request("m", HELLO, 10, {}), None).cost_micros == 0


class _Pydantic:
    """A response object as the openai package's: model_dump(mode="json")."""

    def model_dump(self, mode: str) -> dict[str, Any]:
        assert mode == "json"
        return {"model": "", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}


class _AsyncClient:
    def __init__(self) -> None:
        self.chat = self
        self.completions = self
        self.requests: list[dict[str, Any]] = []

    async def create(self, **request: Any) -> _Pydantic:
        self.requests.append(request)
        return _Pydantic()


def _run(step: Any, request: dict[str, Any]) -> tuple[Any, UsageReport]:
    report = UsageReport()
    context = StepContext(workflow_id="wf", step_id="s", idempotency_key="k", fence=1, attempt=1)

    async def body() -> Any:
        _current_step.set(context)
        _current_usage.set(report)
        return await step(request)

    return asyncio.run(body()), report


def test_model_step_awaits_an_async_client_and_reports_the_requested_model_when_none_answers() -> (
    None
):
    client = _AsyncClient()
    request = model_request("m-9", HELLO, 10, {"temperature": 0})
    answer, report = _run(model_step(client, {"m-9": PRICES}), request)
    assert client.requests == [
        {"model": "m-9", "messages": HELLO, "max_tokens": 10, "temperature": 0}
    ]
    assert model_text(answer) == ""
    journaled = report.for_journal()
    assert journaled is not None
    assert (journaled.model, journaled.usage.units, journaled.usage.cost_micros) == ("m-9", 7, 48)


def test_model_step_refuses_an_answer_that_is_not_a_response() -> None:
    class Odd:
        def __init__(self) -> None:
            self.chat = self
            self.completions = self

        def create(self, **_: Any) -> list[int]:
            return [1]

    with pytest.raises(TypeError, match="not an OpenAI-compatible response"):
        _run(model_step(Odd()), model_request("m", HELLO, 1, {}))
