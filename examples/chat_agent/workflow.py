"""The chat agent: a conversation of any length, one workflow run per conversation.

    wait for "message" → reply (a model step given the whole conversation) → publish → wait ...

Each turn waits for the signal `message` (a string, or {"text": ...}): meanwhile the run is
suspended and holds no worker, and a message sent early waits for it. The model step gets the
whole conversation so far; the reply is published with `ctx.set_state("reply", ...)`
(`{"turn": n, "text": ..., ...}`, `perdure workflow query ID reply`). The run ends on the
message "/bye", after `max_turns` turns, or when no message came for `idle_seconds`; its result
says how many turns there were, how it ended and the conversation's summary.

Every turn adds a few events to the run's journal. `continue_as_new_if_long` is the one place
where a long conversation goes on in a fresh run of the same workflow id, carrying its summary
(`Chat.carry_over`), once the journal holds `HISTORY_LENGTH_LIMIT` events or
`HISTORY_BYTES_LIMIT` bytes.

Input (JSON object; every field optional):

- `max_turns`: the conversation ends after this many turns (default 1,000), counted across the
  runs it continued into;
- `idle_seconds`: it ends when no message came for this long (default a day);
- `summary`: what an earlier run of the conversation carried over, `{"messages": n, "recent":
  [...]}`;
- `turns_before`: the turns the earlier runs had (turns are numbered across runs);
- `reply`: the last reply an earlier run published, published again at once so that a client
  reading it by workflow id never misses it;
- `history_limit`: the journal length (events) at which the conversation continues in a
  fresh run (default `HISTORY_LENGTH_LIMIT`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from examples.inputs import input_fields
from examples.research_agent.model import OfflineModel
from perdure.worker import RetryPolicy, SignalTimeoutError, WorkflowContext, workflow

MESSAGE_SIGNAL = "message"
BYE = "/bye"
DEFAULT_MAX_TURNS = 1000
DEFAULT_IDLE_SECONDS = 86_400.0
MAX_IDLE_SECONDS = 30 * 86_400.0
MAX_MESSAGE_CHARS = 4000
# Past either, a run's loads and replays cost more than a fresh run's: go on in a new one.
HISTORY_LENGTH_LIMIT = 10_000
HISTORY_BYTES_LIMIT = 8 * 1024 * 1024
RETRY = RetryPolicy(initial_interval=1.0, maximum_interval=10.0, maximum_attempts=5)

_model = OfflineModel()


@dataclass(frozen=True)
class ChatInput:
    """The validated input of a run."""

    max_turns: int = DEFAULT_MAX_TURNS
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    summary: dict[str, Any] = field(default_factory=dict)
    turns_before: int = 0
    history_limit: int = HISTORY_LENGTH_LIMIT
    reply: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any) -> ChatInput:
        """Check a run's input; raise ValueError saying what is wrong."""
        raw = input_fields(raw, cls.__dataclass_fields__)
        if raw is None:
            return cls()
        max_turns = _count(raw, "max_turns", DEFAULT_MAX_TURNS, minimum=1)
        turns_before = _count(raw, "turns_before", 0, minimum=0)
        history_limit = _count(raw, "history_limit", HISTORY_LENGTH_LIMIT, minimum=10)
        idle = raw.get("idle_seconds", DEFAULT_IDLE_SECONDS)
        if (
            isinstance(idle, bool)
            or not isinstance(idle, int | float)
            or not math.isfinite(idle)
            or not 0 < idle <= MAX_IDLE_SECONDS
        ):
            raise ValueError(
                f"idle_seconds must be a number of seconds above 0 and at most "
                f"{MAX_IDLE_SECONDS:.0f}, not {idle!r}"
            )
        summary = raw.get("summary", {})
        if not isinstance(summary, dict):
            raise ValueError(f"summary must be a JSON object, not {summary!r}")
        reply = raw.get("reply", {})
        if not isinstance(reply, dict):
            raise ValueError(f"reply must be a JSON object, not {reply!r}")
        return cls(max_turns, float(idle), summary, turns_before, history_limit, reply)

    def to_json(self) -> dict[str, Any]:
        """The input as JSON."""
        return {
            "max_turns": self.max_turns,
            "idle_seconds": self.idle_seconds,
            "summary": self.summary,
            "turns_before": self.turns_before,
            "history_limit": self.history_limit,
            "reply": self.reply,
        }


def _count(raw: dict[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, not {value!r}")
    return value


@dataclass
class Chat:
    """The conversation a run holds: what earlier runs carried over, and this run's messages
    (rebuilt by replay from the journal, so nothing of it is stored twice)."""

    spec: ChatInput
    messages: list[dict[str, str]] = field(default_factory=list)
    last_reply: dict[str, Any] = field(default_factory=dict)

    @property
    def turn(self) -> int:
        """The number of the latest turn, counted across runs."""
        return self.spec.turns_before + sum(1 for m in self.messages if m["role"] == "user")

    def said(self, role: str, text: str) -> None:
        """Add a message."""
        self.messages.append({"role": role, "text": text})

    def summary(self) -> dict[str, Any]:
        """The whole conversation summed up, bounded in size."""
        return _model.summarize(self.spec.summary, self.messages)

    def carry_over(self) -> dict[str, Any]:
        """The input of the run this conversation continues into."""
        spec = self.spec
        return ChatInput(
            spec.max_turns,
            spec.idle_seconds,
            self.summary(),
            self.turn,
            spec.history_limit,
            self.last_reply or spec.reply,
        ).to_json()

    def result(self, ended: str) -> dict[str, Any]:
        """The run's result."""
        return {"turns": self.turn, "ended": ended, "summary": self.summary()}


def message_text(payload: Any) -> str | None:
    """The text of a `message` signal (a string or {"text": ...}), or None if it is not one."""
    text = payload.get("text") if isinstance(payload, dict) else payload
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip()[:MAX_MESSAGE_CHARS]


def reply(summary: dict[str, Any], conversation: list[dict[str, str]]) -> dict[str, Any]:
    """The model step: the next assistant message, from the whole conversation."""
    return _model.chat(summary, conversation)


async def continue_as_new_if_long(ctx: WorkflowContext, chat: Chat) -> None:
    """Where a long conversation goes on in a fresh run with `chat.carry_over()` as its input,
    once this run's journal holds `history_limit` events or HISTORY_BYTES_LIMIT bytes: the
    journal (and a replay after a crash) stays bounded however long the conversation lasts.
    ctx.info measures the journal up to where the code is, the same on every replay."""
    info = ctx.info
    if info.history_length >= chat.spec.history_limit or info.history_bytes >= HISTORY_BYTES_LIMIT:
        await ctx.continue_as_new(chat.carry_over())


@workflow(retry=RETRY)
async def chat_agent(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Answer each message with the model, until "/bye", the turn limit or a long silence."""
    chat = Chat(ChatInput.parse(params))
    how = f"perdure workflow signal {ctx.workflow_id} {MESSAGE_SIGNAL} --payload '\"hello\"'"
    await ctx.set_state("waiting_for", {"signal": MESSAGE_SIGNAL, "how": how})
    if chat.spec.reply:  # the run before published it last: a client may not have read it yet
        await ctx.set_state("reply", chat.spec.reply)
    while chat.turn < chat.spec.max_turns:
        await continue_as_new_if_long(ctx, chat)
        try:
            payload = await ctx.wait_for_signal(MESSAGE_SIGNAL, timeout=chat.spec.idle_seconds)
        except SignalTimeoutError:
            return chat.result("idle")
        text = message_text(payload)
        if text is None:  # reported, and the wait goes on
            await ctx.set_state("last_ignored", {"payload": payload, "why": "not a message"})
            continue
        chat.said("user", text)
        if text == BYE:
            await ctx.set_state("reply", {"turn": chat.turn, "text": "Goodbye."})
            return chat.result("bye")
        answer = await ctx.step("reply", reply, chat.spec.summary, chat.messages)
        chat.said("assistant", answer["text"])
        chat.last_reply = {"turn": chat.turn, **answer}
        await ctx.set_state("reply", chat.last_reply)
    return chat.result("turn_limit")
