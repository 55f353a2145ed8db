"""`python -m examples.research_agent start|notifications`: start a run with its fault switches,
or list the notifications the (stand-in) mail provider delivered.

    python -m examples.research_agent start --topic "durable agents" --id run-1 \\
        [--slow-step research_1 --slow-seconds 20] [--fail-step-once analyze] \\
        [--crash-after-notification] [--crash-mid-stream analyze] [--address localhost:7400]
    perdure approve run-1 --comment "go"
    python -m examples.research_agent notifications run-1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import grpc

from examples.research_agent.notifications import database_path, delivered_notifications
from examples.research_agent.workflow import STEPS, STREAMED_STEPS, AgentInput
from perdure.cli.flags import api_key
from perdure.client import Client


def _say(text: str, *, file: Any = None) -> None:
    print(text, file=file or sys.stdout, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.research_agent", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a research_agent run")
    start.add_argument("--topic", required=True, help="what to research")
    start.add_argument("--id", default="", help="workflow id (generated when omitted)")
    start.add_argument(
        "--slow-step", metavar="STEP", help=f"a step to slow down: {', '.join(STEPS)}"
    )
    start.add_argument(
        "--slow-seconds", type=float, default=0.0, help="how long the slow step sleeps"
    )
    start.add_argument(
        "--fail-step-once", metavar="STEP", help="a step whose first attempt fails (then retried)"
    )
    start.add_argument(
        "--crash-after-notification",
        action="store_true",
        help="the worker exits right after sending the notification, before recording it",
    )
    start.add_argument(
        "--crash-mid-stream",
        metavar="STEP",
        help=f"a streaming step ({', '.join(STREAMED_STEPS)}) whose first attempt's worker "
        "exits after a few tokens (then retried)",
    )
    start.add_argument(
        "--address",
        default=os.environ.get("PERDURE_GATEWAY_ADDRESS", "localhost:7400"),
        help="gateway address (PERDURE_GATEWAY_ADDRESS, default localhost:7400)",
    )
    notifications = commands.add_parser(
        "notifications", help="list the notifications delivered (for one workflow, or all)"
    )
    notifications.add_argument("workflow_id", nargs="?")
    notifications.add_argument(
        "--db", help="the example's SQLite database (PERDURE_EXAMPLE_DB by default)"
    )
    return parser.parse_args(argv)


def build_input(args: argparse.Namespace) -> dict[str, Any]:
    """The workflow input the flags describe; ValueError if it is not valid."""
    raw: dict[str, Any] = {"topic": args.topic}
    if args.slow_step is not None or args.slow_seconds:
        raw["slow_seconds"] = args.slow_seconds
    if args.slow_step is not None:
        raw["slow_step"] = args.slow_step
    if args.fail_step_once is not None:
        raw["fail_step_once"] = args.fail_step_once
    if args.crash_after_notification:
        raw["crash_after_notification"] = True
    if args.crash_mid_stream is not None:
        raw["crash_mid_stream"] = args.crash_mid_stream
    return AgentInput.parse(raw).to_json()


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; return the exit code."""
    args = parse_args(argv)
    if args.command == "notifications":
        found = delivered_notifications(args.workflow_id, args.db)
        for notification in found:
            _say(json.dumps(asdict(notification)))
        _say(f"{len(found)} notification(s) in {database_path(args.db)}", file=sys.stderr)
        return 0
    try:
        value = build_input(args)
    except ValueError as error:
        _say(f"error: {error}", file=sys.stderr)
        return 2
    try:
        with Client(args.address, api_key=api_key()) as client:  # PERDURE_API_KEY or dev's key
            started = client.start_workflow("research_agent", value, workflow_id=args.id)
    except grpc.RpcError as error:
        _say(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    _say(
        json.dumps({"workflow_id": started.workflow_id, "started": started.started, "input": value})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
