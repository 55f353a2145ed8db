"""`perdure approvals list|show|decide` and `perdure approve`: approval records through the
gateway's ApprovalService. A decision names the hash of the details it was shown: the command
reads the approval, shows what it decides on, and decides on that."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import approval_service_pb2_grpc as agrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.flags import UsageError, add_gateway_flags, api_key
from perdure.cli.tables import table, when
from perdure.gateway.http.convert import dumps, to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 30.0
GROUPS = ("approvals", "approve")
APPROVAL_ID_PREFIX = "apr-"
STATUSES = ("pending", "approved", "rejected", "expired")
SHOWN_DETAILS = 120  # characters of the details a decision's line repeats


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `approvals` with its subcommands, and `approve`."""
    approve = subparsers.add_parser(
        "approve",
        help="approve (or --reject) an approval, by its id or by the workflow id of a run "
        "waiting for one",
    )
    add_gateway_flags(approve)
    approve.add_argument("target", help="an approval id (apr-...) or a workflow id")
    _decision_flags(approve)

    parser = subparsers.add_parser("approvals", help="list, show and decide approvals")
    add_gateway_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="the namespace's approvals, newest first")
    listing.add_argument("--status", choices=STATUSES, default=None)
    listing.add_argument("--workflow-id", default="", help="only this workflow id's")
    listing.add_argument("--limit", type=int, default=100, help="at most this many")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show = commands.add_parser("show", help="one approval, with its details")
    show.add_argument("approval_id")
    decide = commands.add_parser("decide", help="approve or --reject an approval by its id")
    decide.add_argument("target", help="an approval id (apr-...) or a workflow id")
    _decision_flags(decide)


def _decision_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reject", action="store_true", help="reject instead of approving")
    parser.add_argument("--reason", "--comment", default="", help="why (recorded and audited)")


def run(args: argparse.Namespace) -> int:
    """Execute `approve` or `approvals ...`; the exit code. A failed call is reported by
    perdure.cli.__main__."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = agrpc.ApprovalServiceStub(channel)
        if args.group == "approve" or args.command == "decide":
            return _decide(stub, args)
        if args.command == "show":
            got = stub.GetApproval(
                apb.GetApprovalRequest(namespace=args.namespace, approval_id=args.approval_id),
                timeout=TIMEOUT,
            )
            print(dumps(to_json(got.approval), indent=2))
            return 0
        return _list(stub, args)


def _list(stub: agrpc.ApprovalServiceStub, args: argparse.Namespace) -> int:
    request = apb.ListApprovalsRequest(
        namespace=args.namespace,
        workflow_id=args.workflow_id,
        status=_status(args.status),
        page_size=max(1, min(args.limit, 1000)),
    )
    approvals = stub.ListApprovals(request, timeout=TIMEOUT).approvals
    if args.json:
        print(dumps([to_json(a) for a in approvals], indent=2))
        return 0
    rows = [
        [
            a.approval_id,
            a.workflow_id,
            a.name,
            wf.ApprovalStatus.Name(a.status).removeprefix("APPROVAL_STATUS_").lower()
            + (" (escalated)" if a.HasField("escalated_time") else ""),
            when(a.expire_time),
            a.decided_by,
        ]
        for a in approvals
    ]
    table(["APPROVAL", "WORKFLOW", "NAME", "STATUS", "EXPIRES", "DECIDED BY"], rows)
    return 0


def _status(name: str | None) -> Any:
    """An ApprovalStatus from its name in lower case (None: any)."""
    return wf.ApprovalStatus.Value(f"APPROVAL_STATUS_{name.upper()}") if name else 0


def _decide(stub: agrpc.ApprovalServiceStub, args: argparse.Namespace) -> int:
    approval = _target(stub, args.namespace, args.target)
    decision = apb.DecideApprovalRequest(
        namespace=args.namespace,
        approval_id=approval.approval_id,
        approve=not args.reject,
        # What was shown is what is decided: a change since is refused.
        details_sha256=approval.details_sha256,
        reason=args.reason,
        decided_by="" if api_key() else getpass.getuser(),
    )
    decided = stub.DecideApproval(decision, timeout=TIMEOUT).approval
    verdict = "rejected" if args.reject else "approved"
    details = dumps(to_json(approval)["details"])
    if len(details) > SHOWN_DETAILS:
        details = details[:SHOWN_DETAILS] + "..."
    print(
        f"{decided.workflow_id}: {verdict} by {decided.decided_by} (approval {approval.name!r}, "
        f"{decided.approval_id}; details {details})"
    )
    return 0


def _target(stub: agrpc.ApprovalServiceStub, namespace: str, target: str) -> wf.Approval:
    """The approval an id names, or the one pending approval of a workflow id."""
    if target.startswith(APPROVAL_ID_PREFIX):
        request = apb.GetApprovalRequest(namespace=namespace, approval_id=target)
        got: apb.GetApprovalResponse = stub.GetApproval(request, timeout=TIMEOUT)
        return got.approval
    answer: apb.ListApprovalsResponse = stub.ListApprovals(
        apb.ListApprovalsRequest(
            namespace=namespace, workflow_id=target, status=wf.APPROVAL_STATUS_PENDING
        ),
        timeout=TIMEOUT,
    )
    listed = list(answer.approvals)
    if not listed:
        raise UsageError(f"workflow {target!r} has no pending approval")
    if len(listed) > 1:
        ids = ", ".join(a.approval_id for a in listed)
        raise UsageError(
            f"workflow {target!r} has {len(listed)} pending approvals ({ids}): name one by its id"
        )
    approval: wf.Approval = listed[0]
    return approval
