"""`perdure replay --module new.code`: the replay gate before a deploy. The journals of runs
(fetched through the gateway's public API, or saved with `perdure workflow history ID --json`)
are replayed against the new code with no step run; exit 0 when every run replays, 1 when one
is non-deterministic, 2 when the gate itself cannot run (docs/operations.md)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.errors import said
from perdure.cli.flags import add_gateway_flags, api_key
from perdure.client import Client
from perdure.worker._history import History
from perdure.worker._registry import WorkflowFunction
from perdure.worker._replay_check import Verdict, check_run, workflows_in

OPEN = (wf.WORKFLOW_STATUS_RUNNING, wf.WORKFLOW_STATUS_WAITING)
PAGE_SIZE = 100
DEFAULT_LIMIT = 1000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class _GateError(Exception):
    """The gate cannot run as asked (exit 2)."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `replay`."""
    parser = subparsers.add_parser(
        "replay",
        help="replay recorded runs against new workflow code (the replay gate before a deploy)",
        description=__doc__,
    )
    add_gateway_flags(parser)
    parser.add_argument("--gateway", dest="address", help="the same as --address")
    parser.add_argument(
        "--module",
        action="append",
        required=True,
        help="module of the new code whose @workflow functions replay the runs (repeatable), "
        "as `perdure worker --module` loads it; the current directory is importable",
    )
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        help="a saved history (`perdure workflow history ID --json`) to replay instead of live "
        "runs (repeatable)",
    )
    parser.add_argument("--type", default="", help="only runs of this workflow type")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--open",
        action="store_true",
        help="only open runs (RUNNING, WAITING): those a deploy replays (the default)",
    )
    which.add_argument(
        "--all",
        action="store_true",
        help="runs of every status, closed ones too (what a reset or fork would replay)",
    )
    parser.add_argument(
        "--since",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="only runs started within this long (30m, 12h, 7d, 2w)",
    )
    parser.add_argument(
        "--limit",
        type=_positive,
        default=None,
        help=f"fetch at most this many runs, newest first (default {DEFAULT_LIMIT})",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(group="replay")


def _duration(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([smhdw])", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: a number and a unit s, m, h, d or w (7d, 12h)"
        )
    return timedelta(seconds=int(match[1]) * _UNITS[match[2]])


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def run(args: argparse.Namespace) -> int:
    """Run the gate; the exit code."""
    logging.getLogger("perdure.worker").setLevel(logging.WARNING)  # replayed steps say nothing
    try:
        workflows = _load(args.module)
        verdicts, skipped = (
            _check_files(args, workflows) if args.file else _check_live(args, workflows)
        )
    except _GateError as error:
        print(f"perdure replay: {error}", file=sys.stderr)
        return 2
    _report(verdicts, skipped, args.json)
    return 1 if any(verdict.failed for verdict in verdicts) else 0


def _load(names: list[str]) -> dict[str, WorkflowFunction]:
    sys.path.insert(0, os.getcwd())
    modules: list[ModuleType] = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except Exception as error:
            detail = "".join(traceback.format_exception_only(error)).strip()
            raise _GateError(f"cannot import --module {name!r}: {detail}") from None
    try:
        workflows = workflows_in(*modules)
    except ValueError as error:
        raise _GateError(str(error)) from None
    if not workflows:
        raise _GateError(f"--module {', '.join(names)} defines no @workflow functions")
    return workflows


def _check_files(
    args: argparse.Namespace, workflows: dict[str, WorkflowFunction]
) -> tuple[list[Verdict], list[Verdict]]:
    live = {"--type": args.type, "--open": args.open, "--all": args.all, "--since": args.since}
    live["--limit"] = args.limit
    given = [flag for flag, value in live.items() if value]
    if given:
        raise _GateError(
            f"{', '.join(given)} choose among live runs; with --file, the histories given are "
            "replayed"
        )
    try:
        histories = [History.read(path) for path in args.file]
    except ValueError as error:
        raise _GateError(str(error)) from None
    return _check(workflows, histories)


def _check_live(
    args: argparse.Namespace, workflows: dict[str, WorkflowFunction]
) -> tuple[list[Verdict], list[Verdict]]:
    try:
        with Client(args.address, api_key=api_key(), namespace=args.namespace) as client:
            return _check(workflows, _fetched(client, args, workflows))
    except grpc.RpcError as error:
        raise _GateError(f"the gateway at {args.address} answered: {said(error)}") from None


def _fetched(
    client: Client, args: argparse.Namespace, workflows: dict[str, WorkflowFunction]
) -> Iterator[History]:
    """The runs asked for, newest first, with their journals; a run of a type the code does
    not have comes without its journal (it is skipped)."""
    for info in _listed(client, args):
        if info.workflow_type not in workflows:
            yield History(info, [])
            continue
        events = client.history(info.workflow_id, page_size=1000, run_id=info.run_id)
        yield History(info, list(events))


def _listed(client: Client, args: argparse.Namespace) -> Iterator[wf.WorkflowInfo]:
    since = datetime.now(UTC) - args.since if args.since is not None else None
    token = ""
    taken = 0
    while True:
        page = client.list(workflow_type=args.type, page_size=PAGE_SIZE, page_token=token)
        for info in page.workflows:
            if since is not None and info.create_time.ToDatetime(tzinfo=UTC) < since:
                return  # newest first: every later run started earlier
            if not args.all and info.status not in OPEN:
                continue
            yield info
            taken += 1
            if taken >= (args.limit or DEFAULT_LIMIT):
                return
        token = page.next_page_token
        if not token:
            return


def _check(
    workflows: dict[str, WorkflowFunction], histories: Iterator[History] | list[History]
) -> tuple[list[Verdict], list[Verdict]]:
    """The verdicts of the runs replayed, and of those skipped (not in --module)."""
    verdicts = [asyncio.run(check_run(workflows, history)) for history in histories]
    replayed = [v for v in verdicts if v.outcome != "skipped"]
    return replayed, [v for v in verdicts if v.outcome == "skipped"]


def _report(verdicts: list[Verdict], skipped: list[Verdict], as_json: bool) -> None:
    counts = {
        "replayed": len(verdicts),
        "passed": sum(v.outcome == "passed" for v in verdicts),
        "non_deterministic": sum(v.outcome == "non_deterministic" for v in verdicts),
        "errors": sum(v.outcome == "error" for v in verdicts),
        "skipped": len(skipped),
    }
    if as_json:
        runs = [v.to_json() for v in [*verdicts, *skipped]]
        print(json.dumps({"runs": runs, "summary": counts}, indent=2))
        return
    rows = [
        (
            v.workflow_id,
            v.run_id,
            v.workflow_type,
            v.outcome.upper().replace("_", "-"),
            "-" if v.position is None else str(v.position),
            v.expected or "-",
            v.found or "-",
        )
        for v in verdicts
    ]
    header = ("WORKFLOW ID", "RUN ID", "TYPE", "RESULT", "POSITION", "EXPECTED", "FOUND")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        print("  ".join(cells).rstrip())
    for verdict in verdicts:
        if verdict.failed:
            print(f"\n{verdict.workflow_id}, run {verdict.run_id}:\n  {verdict.detail}")
    errors = f", {counts['errors']} errors" if counts["errors"] else ""
    print(
        f"\n{counts['replayed']} replayed, {counts['passed']} passed, "
        f"{counts['non_deterministic']} non-deterministic{errors}, "
        f"{counts['skipped']} skipped (not in --module)"
    )
