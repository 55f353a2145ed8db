"""The chat agent example on real processes: its client chats turn by turn, each reply is the
model's answer to the whole conversation, and the run ends on /bye, its turn limit or silence;
its input's checks and what a long conversation carries into its next run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from examples.chat_agent import Chat, ChatInput
from examples.research_agent.model import OfflineModel
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from tests.fixtures.cluster import REPO_ROOT, Cluster

MODULE = "examples.chat_agent"

model = OfflineModel()


def replies_to(*messages: str) -> list[str]:
    """What the model answers at each turn of a conversation of these user messages."""
    conversation: list[dict[str, str]] = []
    answers = []
    for text in messages:
        conversation.append({"role": "user", "text": text})
        answers.append(model.chat({}, conversation)["text"])
        conversation.append({"role": "assistant", "text": answers[-1]})
    return answers


def result_of(client: Client, workflow_id: str) -> Any:
    described = client.wait(workflow_id, timeout=60)
    return json.loads(described.workflow.result.data)


def chat(shared: Cluster, *args: str) -> list[dict[str, Any]]:
    """Run the example's client with `args`; the JSON lines it printed, one per turn."""
    done = subprocess.run(
        [sys.executable, "-m", MODULE, "--address", shared.gateway, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_client_chats_turn_by_turn_until_bye(shared: Cluster, client: Client) -> None:
    lines = chat(shared, "--id", "chat-bye", "hello", "what is a fence?", "/bye")
    assert [line["turn"] for line in lines] == [1, 2, 3]
    assert [line["you"] for line in lines] == ["hello", "what is a fence?", "/bye"]
    # The second reply is the model's answer to the whole conversation, not to one message.
    assert [line["agent"] for line in lines[:2]] == replies_to("hello", "what is a fence?")
    assert lines[1]["agent"] != replies_to("what is a fence?")[0]
    assert lines[2]["agent"] == "Goodbye."
    assert result_of(client, "chat-bye") == {
        "turns": 3,
        "ended": "bye",
        "summary": {"messages": 3, "recent": ["hello", "what is a fence?", "/bye"]},
    }


def test_a_long_chat_continues_as_new_and_its_client_goes_on_with_the_same_id(
    shared: Cluster, client: Client
) -> None:
    lines = chat(shared, "--id", "chat-long", "--history-limit", "10", "--count", "8")
    assert [line["turn"] for line in lines] == list(range(1, 9))  # no message lost or doubled
    latest = client.describe("chat-long").workflow
    assert latest.run_number > 1 and latest.previous_run_id  # it went on in later runs
    first = client.describe("chat-long", run_id=_first_run(client, latest.previous_run_id))
    assert first.workflow.status == wf.WORKFLOW_STATUS_CONTINUED_AS_NEW


def _first_run(client: Client, run_id: str) -> str:
    """Follow a chain back to its first run."""
    while previous := client.describe("chat-long", run_id=run_id).workflow.previous_run_id:
        run_id = previous
    return run_id


def test_messages_sent_early_wait_and_a_malformed_one_is_reported(client: Client) -> None:
    client.start_workflow("chat_agent", {"max_turns": 2}, workflow_id="chat-limit")
    client.signal("chat-limit", "message", {"nope": 1})
    client.signal("chat-limit", "message", "first")
    client.signal("chat-limit", "message", {"text": "second"})

    result = result_of(client, "chat-limit")

    assert (result["turns"], result["ended"]) == (2, "turn_limit")
    reply = client.query("chat-limit", "reply")
    assert (reply["turn"], reply["text"]) == (2, replies_to("first", "second")[1])
    ignored = client.query("chat-limit", "last_ignored")
    assert ignored == {"payload": {"nope": 1}, "why": "not a message"}


def test_a_silent_conversation_ends_when_idle(client: Client) -> None:
    client.start_workflow("chat_agent", {"idle_seconds": 0.2}, workflow_id="chat-idle")

    assert result_of(client, "chat-idle") == {
        "turns": 0,
        "ended": "idle",
        "summary": {"messages": 0, "recent": []},
    }


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("hi", "must be a JSON object"),
        ({"turns": 3}, "unknown input field(s) turns"),
        ({"max_turns": 0}, "max_turns must be a whole number >= 1"),
        ({"max_turns": True}, "max_turns must be a whole number"),
        ({"idle_seconds": 0}, "idle_seconds must be a number of seconds above 0"),
        ({"idle_seconds": float("inf")}, "idle_seconds"),
        ({"summary": "x"}, "summary must be a JSON object"),
        ({"turns_before": -1}, "turns_before must be a whole number >= 0"),
    ],
)
def test_a_bad_input_is_refused_saying_what_is_wrong(raw: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        ChatInput.parse(raw)


def test_a_long_conversation_carries_its_summary_and_turns_into_the_next_run() -> None:
    chat = Chat(ChatInput.parse({"max_turns": 50, "summary": {"messages": 4, "recent": ["a"]}}))
    for text in ("b", "c", "d"):
        chat.said("user", text)
        chat.said("assistant", "ok")

    carried = ChatInput.parse(chat.carry_over())

    assert (carried.max_turns, carried.turns_before) == (50, 3)
    assert carried.summary == {"messages": 7, "recent": ["b", "c", "d"]}
    assert Chat(carried).turn == 3
