"""`perdure workflow start|describe|history|list`: the public API from a shell."""

from __future__ import annotations

import argparse
import json
import os
import sys

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `workflow` and its subcommands."""
    parser = subparsers.add_parser("workflow", help="start and inspect workflows")
    parser.add_argument(
        "--address",
        default=os.environ.get("PERDURE_GATEWAY_ADDRESS", "localhost:7400"),
        help="gateway address (PERDURE_GATEWAY_ADDRESS, default localhost:7400)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    start = commands.add_parser("start", help="start a workflow")
    start.add_argument("workflow_type")
    start.add_argument("--input", default="null", help="the input as JSON (default null)")
    start.add_argument("--id", default="", help="workflow id (generated when omitted)")
    start.add_argument("--task-queue", default="", help="task queue (default 'default')")
    start.add_argument("--wait", action="store_true", help="wait for the result")
    start.add_argument("--timeout", type=float, default=300.0, help="seconds --wait waits")

    describe = commands.add_parser("describe", help="show a workflow and its steps")
    describe.add_argument("workflow_id")

    history = commands.add_parser("history", help="print a workflow's journal")
    history.add_argument("workflow_id")

    listing = commands.add_parser("list", help="list workflows, newest first")
    listing.add_argument("--status", choices=["running", "completed", "failed", "parked"])
    listing.add_argument("--type", default="", help="only this workflow type")
    listing.add_argument("--limit", type=int, default=50)


def _print(message: Message) -> None:
    print(json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2))


def run(args: argparse.Namespace) -> int:
    """Execute a `workflow` subcommand; return the exit code."""
    try:
        with Client(args.address) as client:
            return _dispatch(client, args)
    except grpc.RpcError as error:
        print(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1


def _dispatch(client: Client, args: argparse.Namespace) -> int:
    if args.command == "start":
        try:
            value = json.loads(args.input)
        except json.JSONDecodeError as error:
            print(f"error: --input is not valid JSON: {error}", file=sys.stderr)
            return 2
        started = client.start_workflow(
            args.workflow_type, value, workflow_id=args.id, task_queue=args.task_queue
        )
        if not args.wait:
            _print(started)
            return 0
        described = client.wait(started.workflow_id, timeout=args.timeout)
        _print(described)
        return 0 if described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED else 1
    if args.command == "describe":
        _print(client.describe(args.workflow_id))
    elif args.command == "history":
        for event in client.history(args.workflow_id):
            print(json_format.MessageToJson(event, preserving_proto_field_name=True, indent=None))
    elif args.command == "list":
        status = (
            wf.WorkflowStatus.Value(f"WORKFLOW_STATUS_{args.status.upper()}") if args.status else 0
        )
        page = client.list(status=status, workflow_type=args.type, page_size=args.limit)
        for run in page.workflows:
            print(
                f"{run.workflow_id}\t{run.workflow_type}\t"
                f"{wf.WorkflowStatus.Name(run.status).removeprefix('WORKFLOW_STATUS_')}\t"
                f"{run.create_time.ToJsonString()}"
            )
    return 0
