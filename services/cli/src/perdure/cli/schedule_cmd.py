"""`perdure schedule create|describe|list|pause|unpause|trigger|delete`: schedules that start
workflow runs on a cron or an interval, through the gateway (a reader key reads them, an
operator's changes them)."""

from __future__ import annotations

import argparse
from datetime import UTC

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as sgrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.cli.flags import (
    add_gateway_flags,
    add_gateway_flags_to_subcommands,
    api_key,
    json_argument,
)
from perdure.gateway.http.convert import dumps, to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 30.0
POLICIES = {
    "skip": spb.SCHEDULE_OVERLAP_POLICY_SKIP,
    "buffer-one": spb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
    "allow-all": spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
    "cancel-other": spb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `schedule` and its commands."""
    parser = subparsers.add_parser("schedule", help="schedules that start runs (cron, interval)")
    add_gateway_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a schedule")
    create.add_argument("schedule_id")
    create.add_argument("workflow_type", help="the type each slot starts")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="5 fields, UTC: minute hour day-of-month month day-of-week")
    when.add_argument("--every", type=float, metavar="SECONDS", help="an interval in seconds")
    create.add_argument(
        "--offset", type=float, default=None, metavar="SECONDS", help="with --every: its offset"
    )
    create.add_argument("--input", default="null", help="the runs' input as JSON (@file, -)")
    create.add_argument("--task-queue", default="", help="task queue (default 'default')")
    create.add_argument(
        "--execution-timeout", type=float, default=None, metavar="SECONDS", help="each run's"
    )
    create.add_argument(
        "--overlap",
        choices=sorted(POLICIES),
        default="skip",
        help="what a slot does while the last run is open (default skip)",
    )
    create.add_argument(
        "--catchup-window",
        type=float,
        default=None,
        metavar="SECONDS",
        help="after downtime, start slots missed less than this long ago (default 60)",
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--note", default="", help="why it is paused")
    for name, text in (
        ("describe", "show a schedule: spec, next fire times, recent runs, counts"),
        ("pause", "stop starting runs (slots while paused are skipped)"),
        ("unpause", "start runs again from the next slot"),
        ("trigger", "start a run now, whatever the overlap policy"),
        ("delete", "delete a schedule (its runs stay)"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("schedule_id")
        if name in ("pause", "unpause"):
            command.add_argument("--note", default="", help="why")
    listing = commands.add_parser("list", help="list the namespace's schedules")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_gateway_flags_to_subcommands(commands)


def create_request(args: argparse.Namespace) -> spb.CreateScheduleRequest:
    """The CreateSchedule request the flags of `schedule create` describe."""
    action = api.StartWorkflowRequest(
        workflow_type=args.workflow_type,
        task_queue=args.task_queue,
        input=json_argument("--input", args.input),
    )
    if args.execution_timeout is not None:
        action.execution_timeout.FromNanoseconds(int(args.execution_timeout * 1e9))
    schedule = spb.Schedule(
        schedule_id=args.schedule_id,
        action=action,
        overlap_policy=POLICIES[args.overlap],
        paused=args.paused,
        note=args.note,
    )
    if args.cron is not None:
        schedule.spec.cron = args.cron
    else:
        schedule.spec.interval.FromNanoseconds(int(args.every * 1e9))
    if args.offset is not None:
        schedule.spec.offset.FromNanoseconds(int(args.offset * 1e9))
    if args.catchup_window is not None:
        schedule.catchup_window.FromNanoseconds(int(args.catchup_window * 1e9))
    return spb.CreateScheduleRequest(schedule=schedule, namespace=args.namespace)


def run(args: argparse.Namespace) -> int:
    """Execute a `schedule` command; a failed call is reported by perdure.cli.__main__."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = sgrpc.ScheduleServiceStub(channel)
        named = {"schedule_id": getattr(args, "schedule_id", ""), "namespace": args.namespace}
        if args.command == "create":
            _print(stub.CreateSchedule(create_request(args), timeout=TIMEOUT).schedule)
        elif args.command == "describe":
            request = spb.DescribeScheduleRequest(**named)
            _print(stub.DescribeSchedule(request, timeout=TIMEOUT).schedule)
        elif args.command == "list":
            _list(stub, args)
        elif args.command == "pause":
            stub.PauseSchedule(spb.PauseScheduleRequest(**named, note=args.note), timeout=TIMEOUT)
            print(f"{args.schedule_id}: paused")
        elif args.command == "unpause":
            unpause = spb.UnpauseScheduleRequest(**named, note=args.note)
            stub.UnpauseSchedule(unpause, timeout=TIMEOUT)
            print(f"{args.schedule_id}: unpaused")
        elif args.command == "trigger":
            action = stub.TriggerSchedule(spb.TriggerScheduleRequest(**named), timeout=TIMEOUT)
            print(f"{args.schedule_id}: started {action.action.workflow_id}")
        else:
            stub.DeleteSchedule(spb.DeleteScheduleRequest(**named), timeout=TIMEOUT)
            print(f"{args.schedule_id}: deleted")
    return 0


def _list(stub: sgrpc.ScheduleServiceStub, args: argparse.Namespace) -> None:
    schedules: list[spb.ScheduleInfo] = []
    token = ""
    while True:
        request = spb.ListSchedulesRequest(namespace=args.namespace, page_token=token)
        page = stub.ListSchedules(request, timeout=TIMEOUT)
        schedules.extend(page.schedules)
        token = page.next_page_token
        if not token:
            break
    if args.json:
        print(dumps([to_json(info) for info in schedules], 2))
        return
    rows = [("ID", "SPEC", "TYPE", "OVERLAP", "STATE", "NEXT", "RUNS", "SKIPPED", "MISSED")]
    for info in schedules:
        schedule = info.schedule
        rows.append(
            (
                schedule.schedule_id,
                _spec_text(schedule.spec),
                schedule.action.workflow_type,
                spb.ScheduleOverlapPolicy.Name(schedule.overlap_policy).removeprefix(
                    "SCHEDULE_OVERLAP_POLICY_"
                ),
                "paused" if schedule.paused else "active",
                _time(info.next_fire_times[0]) if info.next_fire_times else "-",
                str(info.action_count),
                str(info.skipped_count),
                str(info.missed_count),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def _spec_text(spec: spb.ScheduleSpec) -> str:
    if spec.cron:
        return f"cron {spec.cron}"
    offset = f"+{spec.offset.seconds}s" if spec.offset.seconds else ""
    return f"every {spec.interval.seconds}s{offset}"


def _time(stamp: Timestamp) -> str:
    return stamp.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _print(message: Message) -> None:
    print(dumps(to_json(message), 2))
