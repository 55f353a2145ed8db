"""`perdure admin storage`: what the database holds (bytes and rows of the namespace's runs,
the largest runs, the journal's growth, events per step) and the database's own size and dead
tuples, through the gateway with a reader key."""

from __future__ import annotations

import argparse
import json

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.flags import add_gateway_flags, api_key
from perdure.cli.tables import table
from perdure.gateway.http.convert import to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 120.0  # the call scans the namespace's runs


def add_parser(admin_subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `admin storage`."""
    parser = admin_subparsers.add_parser(
        "storage", help="the journal's size by namespace, the largest runs, the database's size"
    )
    add_gateway_flags(parser, subcommand=True)
    parser.add_argument("--top", type=int, default=10, help="how many of the largest runs (≤100)")
    parser.add_argument("--json", action="store_true", help="print exact figures as JSON")
    parser.set_defaults(admin_run=run)


def size(value: float) -> str:
    """Bytes in decimal units: "812 B", "12.3 kB", "4.1 GB"."""
    if value < 1000:
        return f"{value:.0f} B"
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 1000 or unit == "TB":
            break
    return f"{value:.1f} {unit}"


def run(args: argparse.Namespace) -> int:
    """Print the storage figures."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        request = admin.GetStorageRequest(namespace=args.namespace, top=args.top)
        answer = stub.GetStorage(request, timeout=TIMEOUT)
    if args.json:
        print(json.dumps(to_json(answer), indent=2))
        return 0
    ns = answer.namespace
    per_step = f"{ns.events / ns.steps:.1f}" if ns.steps else "-"
    print(f"NAMESPACE {ns.namespace}")
    table(
        ("RUNS", "OPEN", "EVENTS", "JOURNAL", "STEPS", "EVENTS/STEP"),
        [
            (
                str(ns.runs),
                str(ns.open_runs),
                str(ns.events),
                size(ns.history_bytes),
                str(ns.steps),
                per_step,
            )
        ],
    )
    rate = answer.write_rate
    if rate.window_seconds:
        print(
            f"\nJOURNAL GROWTH {rate.events_per_second:.2f} events/s, "
            f"{size(rate.bytes_per_second)}/s (net, over the last {rate.window_seconds:.0f} s "
            "between storage samples)"
        )
    else:
        print("\nJOURNAL GROWTH not known yet (needs two storage samples)")
    print("\nLARGEST RUNS")
    table(
        ("WORKFLOW ID", "RUN ID", "TYPE", "STATUS", "EVENTS", "JOURNAL"),
        [
            (
                r.workflow_id,
                r.run_id,
                r.workflow_type,
                wf.WorkflowStatus.Name(r.status).removeprefix("WORKFLOW_STATUS_"),
                str(r.event_count),
                size(r.history_bytes),
            )
            for r in answer.largest_runs
        ],
    )
    print(f"\nDATABASE {size(answer.database_bytes)}")
    table(
        ("TABLE", "DATA", "INDEXES", "LIVE ROWS", "DEAD ROWS", "DEAD SHARE"),
        [
            (
                t.name,
                size(t.table_bytes),
                size(t.index_bytes),
                str(t.live_rows),
                str(t.dead_rows),
                f"{t.dead_share:.1%} ({t.dead_share_source})",
            )
            for t in answer.tables
        ],
    )
    return 0
