"""`python -m examples.chat_agent`: chat with a chat_agent run, one message at a time.

    python -m examples.chat_agent --id chat-1 "hello" "what is a fence?" /bye
    python -m examples.chat_agent --id chat-2 --count 20 [--max-turns 1000]

Each message is sent as the signal `message` (the first one starts the run when there is none
with that id) and the reply the run publishes is printed before the next message goes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import grpc

from examples.chat_agent.workflow import MESSAGE_SIGNAL, ChatInput
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.flags import api_key
from perdure.client import Client

REPLY_TIMEOUT = 60.0
OPEN = (wf.WORKFLOW_STATUS_RUNNING, wf.WORKFLOW_STATUS_WAITING)


class ChatEndedError(Exception):
    """The run closed before it answered."""


def _say(text: str, *, file: Any = None) -> None:
    print(text, file=file or sys.stdout, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.chat_agent", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("messages", nargs="*", help="the messages to send, in order")
    parser.add_argument("--id", default="", help="workflow id (generated when omitted)")
    parser.add_argument(
        "--count", type=int, default=0, help="then send this many generated messages"
    )
    parser.add_argument(
        "--max-turns", type=int, help="the run's turn limit, when this starts it (default 1000)"
    )
    parser.add_argument(
        "--history-limit",
        type=int,
        help="the journal length (events) at which the chat continues in a fresh run",
    )
    parser.add_argument(
        "--address",
        default=os.environ.get("PERDURE_GATEWAY_ADDRESS", "localhost:7400"),
        help="gateway address (PERDURE_GATEWAY_ADDRESS, default localhost:7400)",
    )
    return parser.parse_args(argv)


def latest_turn(client: Client, workflow_id: str) -> int:
    """The turn of the latest reply the run published (0: none yet, or no such run)."""
    try:
        reply = client.query(workflow_id, "reply")
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return 0
        raise
    return int(reply["turn"])


def send(
    client: Client, workflow_id: str, text: str, params: dict[str, Any], answered: int = 0
) -> dict[str, Any]:
    """Send one message (starting the run with `params` if there is none) and return the
    reply to it: the first published after turn `answered` (the last reply this client saw;
    a run that continued as new publishes its predecessor's last reply again)."""
    before = max(answered, latest_turn(client, workflow_id))
    client.signal_with_start(
        "chat_agent", workflow_id, MESSAGE_SIGNAL, text, input=params, signal_id=str(uuid.uuid4())
    )
    deadline = time.monotonic() + REPLY_TIMEOUT
    checked = time.monotonic()
    while True:
        reply: dict[str, Any] = {}
        try:
            reply = client.query(workflow_id, "reply")
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
        if reply.get("turn", 0) > before:
            return reply
        if time.monotonic() - checked > 1.0:  # a run that ended answers nothing more
            checked = time.monotonic()
            described = client.describe(workflow_id)
            if described.workflow.status not in OPEN:
                raise ChatEndedError(f"the run {workflow_id} is closed and took no more messages")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no reply from {workflow_id} within {REPLY_TIMEOUT:.0f}s")
        time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    """Send the messages; return the exit code."""
    args = parse_args(argv)
    messages = [*args.messages, *(f"message {n}" for n in range(1, args.count + 1))]
    if not messages:
        _say("error: give messages to send, or --count N", file=sys.stderr)
        return 2
    raw: dict[str, Any] = {}
    if args.max_turns is not None:
        raw["max_turns"] = args.max_turns
    if args.history_limit is not None:
        raw["history_limit"] = args.history_limit
    try:
        params = ChatInput.parse(raw).to_json()
    except ValueError as error:
        _say(f"error: {error}", file=sys.stderr)
        return 2
    workflow_id = args.id or f"chat-{uuid.uuid4()}"
    try:
        with Client(args.address, api_key=api_key()) as client:
            answered = 0
            for text in messages:
                answer = send(client, workflow_id, text, params, answered)
                answered = answer["turn"]
                _say(json.dumps({"turn": answer["turn"], "you": text, "agent": answer["text"]}))
    except grpc.RpcError as error:
        _say(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    except (ChatEndedError, TimeoutError) as error:
        _say(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
