"""`perdure pause|unpause --workflow-type T | --task-queue Q`, `perdure pauses` and
`perdure workflow pause|unpause ID`: holding back what workers are granted, through the
gateway's AdminService (an operator key; a reader's to list)."""

from __future__ import annotations

import argparse
import json
import re

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.flags import UsageError, add_gateway_flags, api_key
from perdure.gateway.http.convert import to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 30.0
GROUPS = ("pause", "unpause", "pauses")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """Seconds from "5s", "500ms", "2m", "1h" or a plain number of seconds."""
    matched = _DURATION.fullmatch(text.strip())
    if matched is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (say 5s, 500ms, 2m or 1h)")
    return float(matched.group(1)) * _UNIT_SECONDS[matched.group(2)]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `pause`, `unpause` and `pauses`."""
    for name, text in (
        ("pause", "grant nothing more of a workflow type or task queue (leased tasks finish)"),
        ("unpause", "lift a pause: what it held is granted again at once"),
    ):
        parser = subparsers.add_parser(name, help=text)
        add_gateway_flags(parser)
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--workflow-type", default="", help="every run of this type")
        scope.add_argument("--task-queue", default="", help="every task on this queue")
        if name == "pause":
            parser.add_argument("--reason", default="", help="why (shown with the pause)")
    listing = subparsers.add_parser("pauses", help="list the pauses in force")
    add_gateway_flags(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_workflow_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`workflow pause ID` and `workflow unpause ID` (`workflow resume` opens a parked run)."""
    pause = commands.add_parser("pause", help="grant the run to no worker until unpaused")
    pause.add_argument("workflow_id")
    pause.add_argument("--reason", default="", help="why (shown by describe)")
    unpause = commands.add_parser("unpause", help="let a paused run go on at once")
    unpause.add_argument("workflow_id")


def run(args: argparse.Namespace) -> int:
    """Execute `pause`, `unpause`, `pauses` or `workflow pause|unpause`; the exit code."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        verb = args.command if args.group == "workflow" else args.group
        if verb == "pauses":
            return _list(stub, args)
        target = {
            "namespace": args.namespace,
            "workflow_id": getattr(args, "workflow_id", ""),
            "workflow_type": getattr(args, "workflow_type", ""),
            "task_queue": getattr(args, "task_queue", ""),
        }
        named = target["workflow_id"] or target["workflow_type"] or target["task_queue"]
        if not named:
            raise UsageError("name a workflow id, --workflow-type or --task-queue")
        if verb == "pause":
            paused = stub.Pause(admin.PauseRequest(**target, reason=args.reason), timeout=TIMEOUT)
            print(f"{named}: paused" + ("" if paused.changed else " already"))
        else:
            unpaused = stub.Unpause(admin.UnpauseRequest(**target), timeout=TIMEOUT)
            print(f"{named}: unpaused" if unpaused.changed else f"{named}: was not paused")
        return 0


def _list(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    pauses = stub.ListPauses(admin.ListPausesRequest(namespace=args.namespace), timeout=TIMEOUT)
    if args.json:
        print(json.dumps(to_json(pauses).get("pauses", []), indent=2))
        return 0
    for pause in pauses.pauses:
        scope = wf.PauseScope.Name(pause.scope).removeprefix("PAUSE_SCOPE_").lower()
        since = pause.pause_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{scope}\t{pause.name}\t{since}\t{pause.reason}")
    return 0
