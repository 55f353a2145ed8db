"""`perdure workflow start|signal|cancel|...`: the public API from a
shell."""

from __future__ import annotations

import argparse
import json
import uuid

from google.protobuf.message import Message

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.cli import export_cmd, pause_cmd
from perdure.cli.diff_cmd import run_diff
from perdure.cli.flags import (
    UsageError,
    add_gateway_flags,
    add_gateway_flags_to_subcommands,
    api_key,
    json_argument,
)
from perdure.cli.flow_flags import add_flow_flags, flow_options
from perdure.cli.pause_cmd import duration
from perdure.cli.watch_cmd import add_watch_parser, run_start_wait, run_watch
from perdure.client import Client
from perdure.gateway.http.convert import dumps, to_json
from perdure.gateway.http.payloads import shown
from perdure.worker._history import History
from perdure.worker._payload import to_payload


def add_signal_id_flag(parser: argparse.ArgumentParser) -> None:
    """--signal-id: a run takes a signal id once, so the command sent again is applied once."""
    parser.add_argument(
        "--signal-id",
        default="",
        help="the signal's id (default: a new one, printed); repeat a command with the id it "
        "printed and the run takes the signal once",
    )


def signal_id(given: str) -> str:
    """The id a command's signal goes with: the one given, else a new one. Every send of the
    command (a retry after a lost answer included) is then one signal to the run."""
    return given or f"cli-{uuid.uuid4().hex}"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `workflow` with its subcommands."""
    parser = subparsers.add_parser("workflow", help="start, signal, cancel and inspect workflows")
    add_gateway_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)

    start = commands.add_parser("start", help="start a workflow")
    start.add_argument("workflow_type")
    start.add_argument(
        "--input",
        default="null",
        help="the input as JSON, sent as written (default null); @file.json reads it from a "
        "file, - from stdin",
    )
    start.add_argument("--id", default="", help="workflow id (generated when omitted)")
    start.add_argument("--task-queue", default="", help="task queue (default 'default')")
    start.add_argument(
        "--execution-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="fail the run if it is still open this long after its start (default: no limit)",
    )
    start.add_argument(
        "--id-reuse-policy",
        choices=["refuse", "allow", "allow_if_failed"],
        default="refuse",
        help="whether a workflow id whose last run is closed starts a new run (default refuse)",
    )
    start.add_argument(
        "--debounce-key",
        default="",
        help="join the key's run not begun yet (it takes this input and waits the window "
        "again), or start one that begins after the window",
    )
    start.add_argument(
        "--debounce-window",
        type=duration,
        default=None,
        metavar="DURATION",
        help="with --debounce-key: how long the run waits for more starts (5s, 500ms, 2m)",
    )
    start.add_argument(
        "--singleton-key",
        default="",
        help="at most one open run per key: print the key's open run instead of starting one",
    )
    start.add_argument(
        "--wait", action="store_true", help="wait for the run to close and print its result"
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --wait: give up after this long (exit 124; the run goes on; default: none)",
    )
    add_flow_flags(start)

    signal = commands.add_parser("signal", help="send a signal to a workflow")
    signal.add_argument("workflow_id")
    signal.add_argument("signal_name")
    signal.add_argument(
        "--payload",
        default="null",
        help="the payload as JSON, sent as written (default null); @file.json or - (stdin)",
    )
    add_signal_id_flag(signal)

    for name, text in (
        ("cancel", "ask a workflow to cancel (it may compensate first)"),
        ("terminate", "end a workflow at once, without running its code"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("workflow_id")
        command.add_argument("--reason", default="", help="why, for the journal")

    _add_recovery_parsers(commands)
    pause_cmd.add_workflow_parsers(commands)

    query = commands.add_parser("query", help="read a value the workflow published")
    query.add_argument("workflow_id")
    query.add_argument("key")

    describe = commands.add_parser("describe", help="show a workflow and its steps")
    describe.add_argument("workflow_id")

    history = commands.add_parser("history", help="print a workflow's journal")
    history.add_argument("workflow_id")
    history.add_argument(
        "--json",
        action="store_true",
        help="print the run and its journal as one saved history, the file `perdure replay "
        "--file` and perdure.worker.testing read",
    )
    for command in (describe, history):
        command.add_argument(
            "--run-id", default="", help="one run of the workflow id's chain (default: the latest)"
        )

    listing = commands.add_parser("list", help="list workflows, newest first")
    statuses = [
        name.removeprefix("WORKFLOW_STATUS_").lower()
        for name, _ in wf.WorkflowStatus.items()
        if name != "WORKFLOW_STATUS_UNSPECIFIED"
    ]
    listing.add_argument("--status", choices=statuses)
    listing.add_argument("--type", default="", help="only this workflow type")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument(
        "--stuck",
        action="store_true",
        help="only runs found open with no lease, no task and no wake-up (made due again; "
        "listed until a worker loads them), with when they were found",
    )
    listing.add_argument(
        "--parent", default="", help="only the child workflows of this workflow id"
    )
    add_watch_parser(commands)
    add_gateway_flags_to_subcommands(commands)


def _add_recovery_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """resume, reset, fork and diff: getting runs going again after their code changed."""
    resume = commands.add_parser(
        "resume", help="open a parked run again (deploy the fixed code first)"
    )
    resume.add_argument("workflow_id")
    resume.add_argument("--reason", default="", help="why, for the journal")

    reset = commands.add_parser(
        "reset", help="start the workflow's next run from a copy of its journal before a step"
    )
    reset.add_argument("workflow_id")
    point = reset.add_mutually_exclusive_group(required=True)
    point.add_argument("--step", default="", help="the step to run again, and all after it")
    point.add_argument(
        "--event-id", type=int, default=0, help="the first event not copied (2 or more)"
    )
    reset.add_argument("--reason", default="", help="why, for the journal and the audit log")

    fork = commands.add_parser(
        "fork", help="start a run under a new id from a copy of a run's journal"
    )
    fork.add_argument("workflow_id")
    fork.add_argument("--new-id", required=True, help="the fork's workflow id (a free one)")
    fork.add_argument(
        "--step", default="", help="copy only before this step (default: the whole journal)"
    )
    fork.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="STEP_ID=JSON",
        help="replace a completed step's recorded output: STEP_ID='{\"json\": 1}' or "
        "STEP_ID=@file.json (repeatable)",
    )
    fork.add_argument("--reason", default="", help="why, for the audit log")
    for command in (resume, reset, fork):
        command.add_argument(
            "--run-id", default="", help="one run of the workflow id's chain (default: the latest)"
        )

    export_cmd.add_parsers(commands)
    diff = commands.add_parser("diff", help="compare two runs step by step")
    diff.add_argument("workflow_a")
    diff.add_argument("workflow_b")
    diff.add_argument("--run-id-a", default="", help="a run of A's chain (default: the latest)")
    diff.add_argument("--run-id-b", default="", help="a run of B's chain (default: the latest)")
    diff.add_argument("--json", action="store_true", help="the report as JSON")


def _overrides(given: list[str]) -> dict[str, Payload]:
    """--override STEP_ID=JSON or STEP_ID=@file.json, by step id."""
    overrides = {}
    for item in given:
        step_id, separator, value = item.partition("=")
        if not separator or not step_id:
            raise UsageError(f"--override {item[:60]!r} is not STEP_ID=JSON or STEP_ID=@file")
        overrides[step_id] = json_argument(f"--override {step_id}", value)
    return overrides


def _recover(client: Client, args: argparse.Namespace) -> int:
    """resume, reset, fork or diff."""
    if args.command == "diff":
        a, b = (args.workflow_a, args.run_id_a), (args.workflow_b, args.run_id_b)
        return run_diff(client, a, b, args.json)
    if args.command == "resume":
        run_id = client.resume(args.workflow_id, args.reason, run_id=args.run_id)
        print(json.dumps({"workflow_id": args.workflow_id, "run_id": run_id}))
    elif args.command == "reset":
        reset = client.reset(
            args.workflow_id,
            step_id=args.step,
            event_id=args.event_id,
            reason=args.reason,
            run_id=args.run_id,
        )
        _print(reset)
    else:
        forked = client.fork(
            args.workflow_id,
            args.new_id,
            step_id=args.step,
            overrides=_overrides(args.override),
            reason=args.reason,
            run_id=args.run_id,
        )
        _print(forked)
    return 0


RECOVERY_COMMANDS = ("resume", "reset", "fork", "diff")


def _print(message: Message, indent: int | None = 2) -> None:
    """A message as JSON, each payload as its exact JSON text (bytes as base64)."""
    print(dumps(to_json(message), indent))


def run(args: argparse.Namespace) -> int:
    """Execute a `workflow` subcommand; return the exit code. A failed call (a typed
    RpcError) is reported by perdure.cli.__main__."""
    if args.command in ("pause", "unpause"):
        return pause_cmd.run(args)
    if args.command in export_cmd.COMMANDS:
        return export_cmd.run(args)
    with Client(args.address, api_key=api_key(), namespace=args.namespace) as client:
        return _execute(client, args)


def _execute(client: Client, args: argparse.Namespace) -> int:
    if args.command == "signal":
        sent_id = signal_id(args.signal_id)
        accepted = client.signal(
            args.workflow_id,
            args.signal_name,
            json_argument("--payload", args.payload),
            signal_id=sent_id,
        )
        print(json.dumps({"accepted": accepted, "signal_id": sent_id}))
        return 0
    if args.command in RECOVERY_COMMANDS:
        return _recover(client, args)
    if args.command in ("cancel", "terminate"):
        getattr(client, args.command)(args.workflow_id, args.reason)
        return 0
    if args.command == "query":
        print(dumps(shown(to_payload(client.query(args.workflow_id, args.key))), 2))
        return 0
    if args.command == "start":
        value = json_argument("--input", args.input)
        started = client.start_workflow(
            args.workflow_type,
            value,
            workflow_id=args.id,
            task_queue=args.task_queue,
            execution_timeout=args.execution_timeout,
            id_reuse_policy=api.IdReusePolicy.Value(
                f"ID_REUSE_POLICY_{args.id_reuse_policy.upper()}"
            ),
            **flow_options(args),
            debounce_key=args.debounce_key,
            debounce_window=args.debounce_window,
            singleton_key=args.singleton_key,
        )
        if not args.wait:
            _print(started)
            return 0
        return run_start_wait(client.get_handle(started.workflow_id, started.run_id), args)
    if args.command == "watch":
        return run_watch(client.get_handle(args.workflow_id, args.run_id or None), args)
    if args.command == "describe":
        _print(client.describe(args.workflow_id, run_id=args.run_id))
    elif args.command == "history" and args.json:
        info = client.describe(args.workflow_id, run_id=args.run_id).workflow
        events = client.history(args.workflow_id, page_size=1000, run_id=info.run_id)
        print(History(info, list(events)).dumps(), end="")
    elif args.command == "history":
        for event in client.history(args.workflow_id, run_id=args.run_id):
            _print(event, indent=None)
    elif args.command == "list":
        status = (
            wf.WorkflowStatus.Value(f"WORKFLOW_STATUS_{args.status.upper()}") if args.status else 0
        )
        page = client.list(
            status=status,
            workflow_type=args.type,
            page_size=args.limit,
            stuck=args.stuck,
            parent_workflow_id=args.parent,
        )
        for run in page.workflows:
            stuck = f"\tstuck since {run.stuck_time.ToJsonString()}" if args.stuck else ""
            print(
                f"{run.workflow_id}\t{run.workflow_type}\t"
                f"{wf.WorkflowStatus.Name(run.status).removeprefix('WORKFLOW_STATUS_')}\t"
                f"{run.create_time.ToJsonString()}{stuck}"
            )
    return 0
