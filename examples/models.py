"""The model client of the examples: an OpenAI-compatible client, offline by default.

`model_client()` is what the examples' workers give `model_step` (the remote step that answers
`ctx.model_call`). With no setting it is `OfflineClient`, which answers the chat completions
API (`client.chat.completions.create(model=, messages=, max_tokens=)`) offline and
deterministically, with a usage as a provider reports it, so the examples run with no network.
One setting points them at a real endpoint: PERDURE_MODEL_URL (e.g.
https://api.openai.com/v1, or a local server speaking the same API), with OPENAI_API_KEY, uses
the `openai` package's client (`pip install openai`).
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Any

from examples.research_agent.model import OfflineModel, tokens

MODEL_URL_ENV = "PERDURE_MODEL_URL"
_SENTENCES = (
    "A journal of step results makes a crashed process resumable from the last step.",
    "Idempotency keys turn at-least-once delivery into effectively-once effects.",
    "Human approval that takes days must not hold a process or a thread.",
    "Fencing tokens stop a paused worker from writing after its lease moved on.",
    "Operators need to see what a run waits for without reading logs.",
    "Budgets reserved before a call keep a fan-out from overspending.",
    "A compensation undoes a step whose effects a later failure made unwanted.",
    "Delegating a sub-task to a child workflow gives it its own journal and retries.",
)


class _Completions:
    def create(
        self, *, model: str, messages: list[dict[str, Any]], max_tokens: int, **_: Any
    ) -> dict[str, Any]:
        """A chat completion of `messages`, at most `max_tokens` tokens, the same for the same
        request; `usage` counts the prompt's and the answer's tokens as OfflineModel does."""
        prompt = "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages)
        digest = hashlib.sha256(f"{model}\n{prompt}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        answer = tokens(" ".join(rng.sample(_SENTENCES, 3)))
        finish = "length" if len(answer) > max_tokens else "stop"
        text = "".join(answer[:max_tokens]).strip()
        usage = OfflineModel.usage(prompt, text)
        return {
            "id": f"chatcmpl-{digest.hex()[:12]}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
        }


class _Chat:
    def __init__(self) -> None:
        self.completions = _Completions()


class OfflineClient:
    """An OpenAI-compatible client with no network: `chat.completions.create` answers."""

    def __init__(self) -> None:
        self.chat = _Chat()


def model_client() -> Any:
    """The offline client, or with PERDURE_MODEL_URL set the `openai` package's client for that
    endpoint (its key from OPENAI_API_KEY)."""
    url = os.environ.get(MODEL_URL_ENV, "")
    if not url:
        return OfflineClient()
    try:
        import openai  # only for a real endpoint
    except ImportError:
        raise SystemExit(
            f"{MODEL_URL_ENV} is set ({url}): install the OpenAI client to reach it, "
            "`pip install openai`"
        ) from None
    return openai.OpenAI(base_url=url, api_key=os.environ.get("OPENAI_API_KEY", "unset"))
