"""Model calls as steps (worker-protocol.md §32): the request a workflow's `ctx.model_call`
journals, the estimate it reserves, and `model_step`, the remote step that sends the request
to any OpenAI-compatible client and reports the model, tokens and cost it used."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from perdure.worker._flow import Usage, check_key
from perdure.worker._model_usage import ModelPrices, report_model_usage, tokens_cost
from perdure.worker._registry import StepFunction, remote_step

# The remote step type a model call schedules by default, and model_step serves.
MODEL_STEP = "model_call"
# What a chat format adds per message (role, separators) and per reply, at most, in tokens.
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_OVERHEAD_TOKENS = 3
MAX_OUTPUT_TOKENS = 2**31 - 1
# Parameters the call's own arguments set, and streaming, which a step's one result cannot be.
_RESERVED_PARAMS = frozenset({"model", "messages", "max_tokens", "stream"})


def model_request(
    model: str, messages: Sequence[Mapping[str, Any]], max_tokens: int, params: Mapping[str, Any]
) -> dict[str, Any]:
    """A model call's request as the step's JSON input, checked: TypeError or ValueError for
    what a provider would refuse or a step could not carry."""
    check_key("model", model)
    if not model:
        raise ValueError("model must name the model, e.g. 'gpt-4o-mini'")
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise TypeError("messages must be a non-empty list of {'role': ..., 'content': ...}")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise TypeError(f"messages[{index}] must be a dict with a str 'role': {message!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, not {type(max_tokens).__name__}")
    if not 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
        raise ValueError(f"max_tokens must be from 1 to {MAX_OUTPUT_TOKENS}, not {max_tokens}")
    reserved = sorted(_RESERVED_PARAMS & set(params))
    if reserved:
        raise ValueError(
            f"{', '.join(reserved)} cannot be passed as extra parameters: model, messages and "
            "max_tokens are the call's own arguments, and a step's result is not a stream"
        )
    request = {
        "model": model,
        "messages": [dict(message) for message in messages],
        "max_tokens": max_tokens,
        "params": dict(params),
    }
    json.dumps(request)  # TypeError now, rather than at the journal
    return request


def prompt_tokens_bound(messages: Sequence[Mapping[str, Any]]) -> int:
    """At most how many tokens `messages` make: a byte-level tokenizer's token is at least one
    byte of text, so each message's UTF-8 bytes plus the format's overhead bound it. Not a bound
    for non-text content (images): declare the estimate yourself for those."""
    text_bytes = sum(
        len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        for message in messages
        for value in message.values()
    )
    return text_bytes + MESSAGE_OVERHEAD_TOKENS * len(messages) + REPLY_OVERHEAD_TOKENS


def model_estimate(request: Mapping[str, Any], prices: ModelPrices | None) -> Usage:
    """The most a call may use: its prompt's bound plus max_tokens, and at `prices` their cost
    (rounded up), so that budgets reserve no less than the call can spend."""
    prompt = prompt_tokens_bound(request["messages"])
    completion = request["max_tokens"]
    cost = 0
    if prices is not None:
        cost = tokens_cost(prompt, prices.input_micros_per_million) + tokens_cost(
            completion, prices.output_micros_per_million
        )
    return Usage(units=prompt + completion, cost_micros=cost)


def model_step(
    client: Any,
    prices: ModelPrices | Mapping[str, ModelPrices] | None = None,
    *,
    name: str = MODEL_STEP,
) -> StepFunction:
    """The remote step that answers `ctx.model_call`, for a Worker's `steps`: it sends each
    request to `client.chat.completions.create(model=, messages=, max_tokens=, **params)`
    (any OpenAI-compatible client, sync or async: the `openai` package's, or the examples'
    offline model), returns the response as JSON, and reports the model and tokens it used and
    their cost at `prices` (one price for every model, or prices by model name; none: tokens
    only). The report settles the call's reserved estimate and is journaled with the step."""

    async def call_model(request: dict[str, Any]) -> dict[str, Any]:
        create = client.chat.completions.create
        arguments = {
            "model": request["model"],
            "messages": request["messages"],
            "max_tokens": request["max_tokens"],
            **request.get("params", {}),
        }
        if inspect.iscoroutinefunction(create):
            response = await create(**arguments)
        else:
            # A sync client blocks: it runs on a thread of its own, not the worker's event
            # loop (a sync function may still hand back an awaitable).
            response = await asyncio.to_thread(create, **arguments)
            if inspect.isawaitable(response):
                response = await response
        answer = response_json(response)
        model = str(answer.get("model") or request["model"])
        report_model_usage({**answer, "model": model}, _price(prices, model) or ModelPrices(0, 0))
        return answer

    call_model.__name__ = name
    return remote_step(name=name)(call_model)


def response_json(response: Any) -> dict[str, Any]:
    """A client's response as a JSON object: a pydantic model's dump (the openai package), a
    to_dict(), or a mapping."""
    if hasattr(response, "model_dump"):
        value = response.model_dump(mode="json")
    elif hasattr(response, "to_dict"):
        value = response.to_dict()
    else:
        value = response
    if not isinstance(value, Mapping):
        raise TypeError(
            f"the model client answered {type(response).__name__}, not an OpenAI-compatible "
            "response (a mapping, or an object with model_dump() or to_dict())"
        )
    return dict(value)


def model_text(response: Mapping[str, Any]) -> str:
    """The text of a chat completion's first choice ("" when it has none)."""
    choices = response.get("choices") or []
    if not choices:
        return ""
    content = (choices[0].get("message") or {}).get("content")
    return content if isinstance(content, str) else ""


def _price(
    prices: ModelPrices | Mapping[str, ModelPrices] | None, model: str
) -> ModelPrices | None:
    if prices is None or isinstance(prices, ModelPrices):
        return prices
    return prices.get(model)
