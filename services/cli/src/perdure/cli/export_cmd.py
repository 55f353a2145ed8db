"""`perdure workflow export ID [--run-id R] [-o FILE]` and `perdure workflow import FILE
[--namespace NS]`: a run as an archive file (gzip-compressed JSON lines, the format of
perdure.history.run_archive), and back on any cluster, through the gateway: export with a
reader key, import with an admin key."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.cli.flags import UsageError, api_key
from perdure.telemetry.rpc import sync_channel

COMMANDS = ("export", "import")
TIMEOUT = 120.0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `workflow export` and `workflow import`."""
    export = commands.add_parser(
        "export", help="write a run as an archive (gzip-compressed JSON lines)"
    )
    export.add_argument("workflow_id")
    export.add_argument("--run-id", default="", help="one run of the chain (default: the latest)")
    export.add_argument(
        "-o",
        "--output",
        default="",
        help="the file to write (default: ID.perdure-run.gz; - for stdout)",
    )
    restore = commands.add_parser(
        "import", help="restore a closed run from an archive (in --namespace, or the key's)"
    )
    restore.add_argument(
        "file", help="an archive `perdure workflow export` or PERDURE_ARCHIVE wrote"
    )


def run(args: argparse.Namespace) -> int:
    """Execute `workflow export` or `workflow import`; return the exit code."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        if args.command == "export":
            return _export(stub, args)
        return _import(stub, args)


def _export(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    request = admin.ExportWorkflowRequest(
        namespace=args.namespace, workflow_id=args.workflow_id, run_id=args.run_id
    )
    answer = stub.ExportWorkflow(request, timeout=TIMEOUT)
    if args.output == "-":
        sys.stdout.buffer.write(answer.archive)
        return 0
    path = Path(args.output or f"{args.workflow_id.replace('/', '_')}.perdure-run.gz")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(answer.archive)
    temporary.replace(path)  # a reader never sees half a file
    summary = {"file": str(path), "run_id": answer.run_id, "event_count": answer.event_count}
    print(json.dumps(summary), file=sys.stderr)
    return 0


def _import(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    try:
        archive = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read {args.file}: {error.strerror}") from error
    request = admin.ImportWorkflowRequest(namespace=args.namespace, archive=archive)
    answer = stub.ImportWorkflow(request, timeout=TIMEOUT)
    print(
        json.dumps(
            {
                "workflow_id": answer.workflow_id,
                "run_id": answer.run_id,
                "event_count": answer.event_count,
                "earlier_run": answer.earlier_run,
            }
        )
    )
    return 0
