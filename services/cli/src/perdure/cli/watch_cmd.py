"""`perdure workflow watch ID [--stream NAME]` and `start --wait`: a run followed live through
perdure.client (pushed, never polled) until it closes."""

from __future__ import annotations

import argparse
import json
import sys

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import (
    WorkflowHandle,
    WorkflowOutcomeError,
    WorkflowTimeoutError,
    to_payload,
)
from perdure.gateway.http.convert import dumps, to_json
from perdure.gateway.http.payloads import shown

TIMEOUT_EXIT = 124  # as timeout(1): the wait ran out, the run goes on


def add_watch_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `workflow watch`."""
    watch = commands.add_parser(
        "watch",
        help="print a run's events as they are committed (or, with --stream, the text its "
        "steps emit), until it closes",
    )
    watch.add_argument("workflow_id")
    watch.add_argument(
        "--stream",
        metavar="NAME",
        default=None,
        help="print the text of this stream instead (emit()'s default is 'output'); a failed "
        "attempt's text is followed by a line saying it was reset",
    )
    watch.add_argument(
        "--run-id", default="", help="one run of the workflow id's chain (default: the latest)"
    )


def run_start_wait(handle: WorkflowHandle, args: argparse.Namespace) -> int:
    """Print the started run's result as JSON once it closes; 1 if it did not complete,
    TIMEOUT_EXIT after --timeout."""
    try:
        value = handle.result(timeout=args.timeout)
    except WorkflowTimeoutError:
        print(
            f"error: workflow {handle.workflow_id!r} still running after {args.timeout:g}s; "
            f"it goes on (perdure workflow watch {handle.workflow_id} follows it)",
            file=sys.stderr,
        )
        return TIMEOUT_EXIT
    except WorkflowOutcomeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(dumps(shown(to_payload(value)), 2))
    return 0


def run_watch(handle: WorkflowHandle, args: argparse.Namespace) -> int:
    """Follow the run until it closes; 0 if it completed."""
    if args.stream is not None:
        return _watch_text(handle, args.stream)
    last: wf.WorkflowInfo | None = None
    for message in handle.watch():
        for event in message.events:
            print(dumps(to_json(event), None), flush=True)
        if message.HasField("workflow"):
            last = message.workflow
    if last is None or last.status == wf.WORKFLOW_STATUS_COMPLETED:
        return 0
    status = wf.WorkflowStatus.Name(last.status).removeprefix("WORKFLOW_STATUS_")
    failure = f": {last.failure.type}: {last.failure.message}" if last.failure.type else ""
    print(f"error: workflow {handle.workflow_id!r} ended {status}{failure}", file=sys.stderr)
    return 1


def _watch_text(handle: WorkflowHandle, stream: str) -> int:
    """Print each chunk as it comes; a reset ends the line and says so, the retry's text
    follows."""
    for frame in handle.stream(stream or "output"):
        if frame.reset:
            print(
                f"\n[reset: step {frame.step_id} attempt {frame.attempt} failed; its text above "
                "is void, the retry's follows]",
                flush=True,
            )
            continue
        chunk = frame.data if isinstance(frame.data, str) else json.dumps(frame.data)
        print(chunk, end="", flush=True)
    print(flush=True)
    return 0
