"""An offline, deterministic stand-in for a language model provider.

The research agent calls a model at every step, the chat agent at every turn. A real provider
is slow, costs money, needs a network and answers differently each time; this one answers
instantly, offline, and the same prompt always gets the same answer, so the examples run
anywhere (CI included) and their outputs can be compared across runs. What it writes is
plausible filler chosen by a hash of the prompt.

Like a real provider it can also stream a text token by token (`stream`), paced so that a
person watching sees the words arrive: `PERDURE_EXAMPLE_TOKEN_DELAY` seconds per token
(default 0.02; the test suite sets 0).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import time
from collections.abc import Iterator
from typing import Any

MODEL_NAME = "offline-deterministic-1"
TOKEN_DELAY_ENV = "PERDURE_EXAMPLE_TOKEN_DELAY"
DEFAULT_TOKEN_DELAY = 0.02
_TOKEN = re.compile(r"\S+\s*|\s+")  # a word and the blanks after it (or leading blanks)

_ANGLES = (
    "background and definitions",
    "state of the art",
    "failure modes seen in production",
    "costs and operational burden",
    "open questions",
)
_FINDINGS = (
    "most outages come from work lost between a side effect and its record",
    "teams rebuild retries, timers and state machines by hand in every service",
    "a journal of step results makes a crashed process resumable from the last step",
    "idempotency keys turn at-least-once delivery into effectively-once effects",
    "human approval that takes days must not hold a process or a thread",
    "fencing tokens stop a paused worker from writing after its lease moved on",
    "replay needs deterministic code outside the recorded steps",
    "operators need to see what a run waits for without reading logs",
)
_THEMES = ("reliability", "cost", "operability", "correctness", "developer experience")
_OPENERS = (
    "Good question.",
    "Here is how I see it.",
    "Short answer first.",
    "Let me build on what we said.",
    "Thanks, that helps.",
)
_RECOMMENDATIONS = (
    "adopt durable execution for the long-running agent flows first",
    "pilot durable execution on one approval-heavy workflow, then widen",
    "keep the current queue for short jobs and move multi-step agents to durable workflows",
)


def tokens(text: str) -> list[str]:
    """`text` cut into tokens as a provider streams them: joined, they are `text` again."""
    return _TOKEN.findall(text)


def token_delay() -> float:
    """The pause before each streamed token, from PERDURE_EXAMPLE_TOKEN_DELAY (seconds)."""
    raw = os.environ.get(TOKEN_DELAY_ENV, "")
    try:
        delay = float(raw) if raw else DEFAULT_TOKEN_DELAY
    except ValueError:
        raise ValueError(f"{TOKEN_DELAY_ENV} must be a number of seconds, not {raw!r}") from None
    if not 0 <= delay <= 10:
        raise ValueError(f"{TOKEN_DELAY_ENV} must be from 0 to 10 seconds, not {raw!r}")
    return delay


class OfflineModel:
    """A model provider with no network: `complete(task, prompt)` is a pure function."""

    name = MODEL_NAME

    def stream(self, text: str) -> Iterator[str]:
        """An answer's `text` token by token, each after the configured pause (as a provider's
        streaming API delivers it)."""
        delay = token_delay()
        for token in tokens(text):
            if delay:
                time.sleep(delay)
            yield token

    def _rng(self, task: str, prompt: str) -> random.Random:
        digest = hashlib.sha256(f"{self.name}\n{task}\n{prompt}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    @staticmethod
    def usage(prompt: str, completion: str) -> dict[str, int]:
        """What a call of `prompt` answered with `completion` used, as an OpenAI-compatible
        provider reports it (its response's `usage`)."""
        prompt_tokens, completion_tokens = len(tokens(prompt)), len(tokens(completion))
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    @staticmethod
    def fingerprint(text: str) -> str:
        """A short, stable id of a text (what a provider would call a response id)."""
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def plan(self, topic: str) -> dict[str, Any]:
        """Two research questions about `topic`."""
        rng = self._rng("plan", topic)
        angles = rng.sample(_ANGLES, 2)
        return {
            "topic": topic,
            "questions": [f"What are the {angle} of {topic}?" for angle in angles],
            "model": self.name,
        }

    def research(self, topic: str, question: str) -> dict[str, Any]:
        """Findings and (fictional, offline) sources for one question."""
        rng = self._rng("research", f"{topic}\n{question}")
        findings = rng.sample(_FINDINGS, 3)
        return {
            "question": question,
            "findings": findings,
            "sources": [f"offline://corpus/{self.fingerprint(f)}" for f in findings],
        }

    def analyze(self, topic: str, research: list[dict[str, Any]]) -> dict[str, Any]:
        """The themes the findings share."""
        findings = [finding for notes in research for finding in notes["findings"]]
        rng = self._rng("analyze", "\n".join([topic, *findings]))
        themes = rng.sample(_THEMES, 2)
        return {
            "themes": themes,
            "summary": (
                f"{len(findings)} findings on {topic} point at {themes[0]} and {themes[1]}; "
                f"the strongest: {findings[0]}."
            ),
        }

    def recommend(self, topic: str, analysis: dict[str, Any]) -> dict[str, Any]:
        """One recommendation with a confidence."""
        rng = self._rng("recommend", f"{topic}\n{analysis['summary']}")
        return {
            "recommendation": f"For {topic}: {rng.choice(_RECOMMENDATIONS)}.",
            "confidence": round(rng.uniform(0.62, 0.93), 2),
            "rationale": analysis["summary"],
        }

    def report(
        self,
        topic: str,
        plan: dict[str, Any],
        research: list[dict[str, Any]],
        analysis: dict[str, Any],
        recommendation: dict[str, Any],
        approval_comment: str,
    ) -> dict[str, Any]:
        """The final report, in Markdown."""
        lines = [f"# Research report: {topic}", "", "## Questions"]
        lines += [f"- {question}" for question in plan["questions"]]
        lines += ["", "## Findings"]
        for notes in research:
            lines += [f"- {finding}" for finding in notes["findings"]]
        lines += ["", "## Analysis", analysis["summary"], "", "## Recommendation"]
        lines += [f"{recommendation['recommendation']} (confidence {recommendation['confidence']})"]
        if approval_comment:
            lines += ["", f"Approver's comment: {approval_comment}"]
        body = "\n".join(lines)
        return {"title": f"Research report: {topic}", "body": body, "id": self.fingerprint(body)}

    def chat(self, summary: dict[str, Any], conversation: list[dict[str, str]]) -> dict[str, Any]:
        """The next assistant message of a conversation (messages with `role` "user" or
        "assistant" and `text`) whose earlier part `summarize` summed up. The answer depends
        on all of it; its size does not grow with it."""
        transcript = "\n".join(f"{m['role']}: {m['text']}" for m in conversation)
        context = f"{sorted(summary.items())}\n{transcript}"
        rng = self._rng("chat", context)
        last = next((m["text"] for m in reversed(conversation) if m["role"] == "user"), "")
        quoted = last if len(last) <= 80 else last[:77] + "..."
        opener, topic = rng.choice(_OPENERS), rng.choice(_FINDINGS)
        return {
            "text": f'{opener} You said "{quoted}". On that: {topic}.',
            "context": self.fingerprint(context),
            "model": self.name,
        }

    @staticmethod
    def summarize(summary: dict[str, Any], conversation: list[dict[str, str]]) -> dict[str, Any]:
        """A summary of an earlier `summary` and the conversation after it, bounded in size:
        how many user messages there were and the last three."""
        said = [m["text"][:80] for m in conversation if m["role"] == "user"]
        recent = [*summary.get("recent", []), *said][-3:]
        return {"messages": int(summary.get("messages", 0)) + len(said), "recent": recent}
