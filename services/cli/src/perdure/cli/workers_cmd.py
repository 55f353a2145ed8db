"""`perdure workers`: the workers connected now, the builds seen and the open runs each still
holds (so an operator knows when an old build can stop), and `perdure workers policy TYPE
pinned|auto-upgrade|unversioned`: a workflow type's routing policy. Through the gateway, with a
reader key (an operator's to set a policy)."""

from __future__ import annotations

import argparse
import json

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.cli.flags import add_gateway_flags, add_gateway_flags_to_subcommands, api_key
from perdure.cli.tables import table, when
from perdure.gateway.http.convert import to_json
from perdure.telemetry.rpc import sync_channel

POLICIES = {
    "pinned": admin.ROUTING_POLICY_PINNED,
    "auto-upgrade": admin.ROUTING_POLICY_AUTO_UPGRADE,
    "unversioned": admin.ROUTING_POLICY_UNVERSIONED,
}
POLICY_NAMES = {value: name for name, value in POLICIES.items()}
TIMEOUT = 30.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `workers` and `workers policy`."""
    parser = subparsers.add_parser(
        "workers", help="connected workers, builds and their open runs; routing policies"
    )
    add_gateway_flags(parser)
    parser.add_argument("--task-queue", default="", help="only this task queue")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    commands = parser.add_subparsers(dest="command")
    policy = commands.add_parser(
        "policy",
        help="set a workflow type's routing policy: pinned (runs stay on the build that "
        "started them), auto-upgrade (runs move to the newest build at their next task) or "
        "unversioned (any worker; the default)",
    )
    policy.add_argument("workflow_type")
    policy.add_argument("policy", choices=sorted(POLICIES))
    add_gateway_flags_to_subcommands(commands)


def run(args: argparse.Namespace) -> int:
    """Execute `workers` or `workers policy`; return the exit code."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        if args.command == "policy":
            return _set_policy(stub, args)
        return _show(stub, args)


def _set_policy(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    request = admin.SetWorkflowPolicyRequest(
        namespace=args.namespace, workflow_type=args.workflow_type, policy=POLICIES[args.policy]
    )
    answer = stub.SetWorkflowPolicy(request, timeout=TIMEOUT)
    set_to = answer.policy
    print(f"{set_to.workflow_type}: {POLICY_NAMES[set_to.policy]} (namespace {set_to.namespace})")
    return 0


def _show(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    scope = {"namespace": args.namespace, "task_queue": args.task_queue}
    workers = stub.ListWorkers(admin.ListWorkersRequest(**scope), timeout=TIMEOUT)
    builds = stub.ListBuilds(admin.ListBuildsRequest(**scope), timeout=TIMEOUT)
    policies = stub.ListWorkflowPolicies(
        admin.ListWorkflowPoliciesRequest(namespace=args.namespace), timeout=TIMEOUT
    )
    if args.json:
        shown = {
            "workers": to_json(workers).get("workers", []),
            "builds": to_json(builds).get("builds", []),
            "policies": to_json(policies).get("policies", []),
        }
        print(json.dumps(shown, indent=2))
        return 0
    print("WORKERS")
    table(
        ("TASK QUEUE", "BUILD", "IDENTITY", "WORKFLOW TYPES", "STEP TYPES", "IN FLIGHT"),
        [
            (
                w.task_queue,
                w.build_id or "-",
                w.identity,
                ",".join(w.workflow_types) or "-",
                ",".join(w.step_types) or "-",
                f"{w.tasks_in_flight}/{w.capacity}",
            )
            for w in workers.workers
        ],
    )
    print("\nBUILDS (newest first per task queue)")
    table(
        (
            "TASK QUEUE",
            "BUILD",
            "FIRST SEEN",
            "LAST SEEN",
            "WORKERS",
            "OPEN RUNS",
            "PINNED RUNS",
            "NEWEST FOR",
        ),
        [
            (
                b.task_queue,
                b.build_id or "-",
                when(b.first_seen_time),
                when(b.last_seen_time),
                str(b.connected_workers),
                str(b.open_runs),
                str(b.pinned_runs),
                ",".join(b.newest_for) or "-",
            )
            for b in builds.builds
        ],
    )
    print("\nPOLICIES (types not listed are unversioned)")
    table(
        ("WORKFLOW TYPE", "POLICY", "SET"),
        [
            (p.workflow_type, POLICY_NAMES.get(p.policy, "?"), when(p.update_time))
            for p in policies.policies
        ],
    )
    return 0
