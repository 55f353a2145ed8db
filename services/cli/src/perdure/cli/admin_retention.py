"""`perdure admin retention show [NS]` and `perdure admin retention set NS DURATION`: how long
a namespace's closed runs are kept (a reader key shows, an admin key sets)."""

from __future__ import annotations

import argparse
import json
import re

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.cli.flags import add_gateway_flags, api_key
from perdure.gateway.http.convert import to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 30.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)?")
_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_WORDS = ("forever", "default")


def retention(text: str) -> admin.SetRetentionRequest:
    """The request a DURATION names: "30d", "12h", "90m", "45s", a plain number of seconds,
    "forever", or "default" (the cluster's PERDURE_RETENTION again)."""
    word = text.strip().lower()
    if word == "forever":
        return admin.SetRetentionRequest(forever=True)
    if word == "default":
        return admin.SetRetentionRequest(use_default=True)
    matched = _DURATION.fullmatch(word)
    if matched is None or float(matched.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a retention (say 30d, 12h, 90m, 45s, forever or default)"
        )
    return admin.SetRetentionRequest(
        seconds=float(matched.group(1)) * _UNIT_SECONDS[matched.group(2)]
    )


def describe(kept: admin.Retention) -> str:
    """One line: the namespace, how long its closed runs are kept, and whence."""
    if kept.forever:
        span = "forever"
    elif kept.seconds % 86400 == 0:
        span = f"{kept.seconds / 86400:g}d"
    elif kept.seconds % 3600 == 0:
        span = f"{kept.seconds / 3600:g}h"
    else:
        span = f"{kept.seconds:g}s"
    return f"{kept.namespace}\t{span}\t{'default' if kept.is_default else 'set'}"


def add_parser(admin_subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `admin retention show|set`."""
    parser = admin_subparsers.add_parser(
        "retention", help="how long a namespace's closed runs are kept"
    )
    commands = parser.add_subparsers(dest="retention_command", required=True)
    show = commands.add_parser("show", help="show a namespace's retention (a reader key)")
    add_gateway_flags(show, subcommand=True)
    show.add_argument("ns", nargs="?", default="", help="the namespace (default: --namespace)")
    show.add_argument("--json", action="store_true", help="print JSON")
    change = commands.add_parser("set", help="set a namespace's retention (an admin key)")
    add_gateway_flags(change, subcommand=True)
    change.add_argument("ns", help="the namespace")
    change.add_argument("duration", type=retention, help="30d, 12h, 90m, 45s, forever or default")
    change.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(admin_run=run)


def run(args: argparse.Namespace) -> int:
    """Execute `admin retention show|set`; the exit code."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        namespace = args.ns or args.namespace
        if args.retention_command == "show":
            kept = stub.GetRetention(
                admin.GetRetentionRequest(namespace=namespace), timeout=TIMEOUT
            ).retention
        else:
            request: admin.SetRetentionRequest = args.duration
            request.namespace = namespace
            kept = stub.SetRetention(request, timeout=TIMEOUT).retention
    print(json.dumps(to_json(kept), indent=2) if args.json else describe(kept))
    return 0
