"""`perdure limits` and `perdure budgets`: the keys' limits (runs and steps in flight,
requests per second, units per minute, fairness weights) and the budgets on keys and on the
namespace, through the gateway: listing needs a reader key, changing an operator's."""

from __future__ import annotations

import argparse
import json
import re

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.cli.flags import (
    UsageError,
    add_gateway_flags,
    add_gateway_flags_to_subcommands,
    api_key,
)
from perdure.cli.tables import table, when
from perdure.gateway.http.convert import to_json
from perdure.telemetry.rpc import sync_channel

TIMEOUT = 30.0
PERIODS = {
    "none": fpb.BUDGET_PERIOD_NONE,
    "hour": fpb.BUDGET_PERIOD_HOUR,
    "day": fpb.BUDGET_PERIOD_DAY,
    "week": fpb.BUDGET_PERIOD_WEEK,
    "month": fpb.BUDGET_PERIOD_MONTH,
}
PERIOD_NAMES = {value: name for name, value in PERIODS.items()}
_RATE = re.compile(r"(\d+(?:\.\d+)?)/(s|m)")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `limits` and `budgets`, each with list (the default), set and delete."""
    limits = subparsers.add_parser("limits", help="keys' limits: concurrency, rates, fairness")
    add_gateway_flags(limits)
    limits.add_argument("--json", action="store_true", help="print JSON instead of a table")
    commands = limits.add_subparsers(dest="command")
    set_limit = commands.add_parser("set", help="set a key's limits (replacing any it had)")
    set_limit.add_argument("key", help="e.g. tenant:acme or provider:openai")
    set_limit.add_argument("--max-runs", type=int, help="runs of the key executing at once")
    set_limit.add_argument("--max-steps", type=int, help="steps of the key executing at once")
    set_limit.add_argument("--rate", help="grants per second or minute, e.g. 50/s or 300/m")
    set_limit.add_argument("--units-per-minute", type=int, help="estimated units (tokens)")
    set_limit.add_argument("--weight", type=int, help="its share as a fairness key (1-1000)")
    delete_limit = commands.add_parser("delete", help="remove a key's limits")
    delete_limit.add_argument("key")
    add_gateway_flags_to_subcommands(commands)

    budgets = subparsers.add_parser("budgets", help="budgets of keys and of the namespace")
    add_gateway_flags(budgets)
    budgets.add_argument("--json", action="store_true", help="print JSON instead of a table")
    budgets.add_argument("--workflow-id", default="", help="only this run's own budget")
    commands = budgets.add_subparsers(dest="command")
    set_budget = commands.add_parser("set", help="set a budget (replacing its limit)")
    set_budget.add_argument("--key", default="", help="the key (default: the whole namespace)")
    set_budget.add_argument("--units", type=int, help="at most this many units a period")
    set_budget.add_argument(
        "--cost-micros", type=int, help="at most this much money a period, in millionths"
    )
    set_budget.add_argument("--period", choices=list(PERIODS), default="none")
    delete_budget = commands.add_parser("delete", help="remove a budget")
    delete_budget.add_argument("--key", default="", help="the key (default: the namespace's)")
    add_gateway_flags_to_subcommands(commands)


def run(args: argparse.Namespace) -> int:
    """Execute `limits ...` or `budgets ...`; return the exit code."""
    with sync_channel(args.address, api_key=api_key()) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        if args.group == "limits":
            return _limits(stub, args)
        return _budgets(stub, args)


def requests_per_second(rate: str) -> float:
    """A rate as `--rate` takes it ("50/s", "300/m"), per second."""
    matched = _RATE.fullmatch(rate.strip())
    if matched is None:
        raise UsageError(f"--rate must be like 50/s or 300/m, not {rate!r}")
    count = float(matched.group(1))
    return count if matched.group(2) == "s" else count / 60


def _limits(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    if args.command == "set":
        limit = admin.FlowLimit(key=args.key)
        for field, value in (
            ("max_runs", args.max_runs),
            ("max_steps", args.max_steps),
            ("units_per_minute", args.units_per_minute),
            ("fairness_weight", args.weight),
        ):
            if value is not None:
                setattr(limit, field, value)
        if args.rate is not None:
            limit.requests_per_second = requests_per_second(args.rate)
        request = admin.SetFlowLimitRequest(namespace=args.namespace, limit=limit)
        stored = stub.SetFlowLimit(request, timeout=TIMEOUT).limit
        print(f"{stored.key}: {_limit_text(stored)}")
        return 0
    if args.command == "delete":
        gone = admin.DeleteFlowLimitRequest(namespace=args.namespace, key=args.key)
        stub.DeleteFlowLimit(gone, timeout=TIMEOUT)
        print(f"{args.key}: no limits")
        return 0
    listed = stub.ListFlowLimits(
        admin.ListFlowLimitsRequest(namespace=args.namespace), timeout=TIMEOUT
    )
    if args.json:
        print(json.dumps(to_json(listed).get("limits", []), indent=2))
        return 0
    table(
        ("KEY", "LIMITS", "RUNS IN FLIGHT", "STEPS IN FLIGHT"),
        [
            (limit.key, _limit_text(limit), str(limit.runs_in_flight), str(limit.steps_in_flight))
            for limit in listed.limits
        ],
    )
    return 0


def _limit_text(limit: admin.FlowLimit) -> str:
    parts = []
    if limit.HasField("max_runs"):
        parts.append(f"max {limit.max_runs} runs")
    if limit.HasField("max_steps"):
        parts.append(f"max {limit.max_steps} steps")
    if limit.HasField("requests_per_second"):
        parts.append(f"{limit.requests_per_second:g}/s")
    if limit.HasField("units_per_minute"):
        parts.append(f"{limit.units_per_minute} units/min")
    if limit.HasField("fairness_weight"):
        parts.append(f"weight {limit.fairness_weight}")
    return ", ".join(parts) or "-"


def _budgets(stub: admingrpc.AdminServiceStub, args: argparse.Namespace) -> int:
    if args.command == "set":
        if args.units is None and args.cost_micros is None:
            raise UsageError("budgets set needs --units, --cost-micros or both")
        limit = fpb.Budget()
        if args.units is not None:
            limit.units = args.units
        if args.cost_micros is not None:
            limit.cost_micros = args.cost_micros
        budget = admin.BudgetInfo(key=args.key, limit=limit, period=PERIODS[args.period])
        request = admin.SetBudgetRequest(namespace=args.namespace, budget=budget)
        stored = stub.SetBudget(request, timeout=TIMEOUT).budget
        print(f"{stored.key or '(namespace)'}: {_budget_text(stored)}")
        return 0
    if args.command == "delete":
        removed = admin.DeleteBudgetRequest(namespace=args.namespace, key=args.key)
        stub.DeleteBudget(removed, timeout=TIMEOUT)
        print(f"{args.key or '(namespace)'}: no budget")
        return 0
    listed = stub.ListBudgets(
        admin.ListBudgetsRequest(namespace=args.namespace, workflow_id=args.workflow_id),
        timeout=TIMEOUT,
    )
    if args.json:
        print(json.dumps(to_json(listed).get("budgets", []), indent=2))
        return 0
    table(
        ("BUDGET", "LIMIT", "PERIOD FROM", "RESERVED", "SPENT", "REFUSED"),
        [
            (
                (b.workflow_id and f"run {b.workflow_id}") or b.key or "(namespace)",
                _budget_text(b),
                when(b.period_start) if b.HasField("period_start") else "-",
                _usage_text(b.reserved),
                _usage_text(b.spent),
                str(b.refusals),
            )
            for b in listed.budgets
        ],
    )
    return 0


def _budget_text(budget: admin.BudgetInfo) -> str:
    parts = []
    if budget.limit.HasField("units"):
        parts.append(f"{budget.limit.units} units")
    if budget.limit.HasField("cost_micros"):
        parts.append(f"{budget.limit.cost_micros} cost micros")
    period = PERIOD_NAMES.get(budget.period, "none")
    return " and ".join(parts) + ("" if period == "none" else f" a {period}")


def _usage_text(usage: fpb.Usage) -> str:
    return f"{usage.units} units, {usage.cost_micros} micros"
