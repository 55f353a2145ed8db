"""`perdure workflow start`'s flow control flags: keys, priority, fairness key and budget
(docs/worker-protocol.md §27), turned into the client's start options."""

from __future__ import annotations

import argparse
from typing import Any

from perdure.cli.flags import UsageError
from perdure.worker._flow import Budget, run_flow


def add_flow_flags(parser: argparse.ArgumentParser) -> None:
    """--key (repeatable), --priority, --fairness-key, --budget-units, --budget-cost-micros,
    --on-budget-exceeded."""
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        dest="keys",
        metavar="KEY",
        help="a concurrency, rate and budget key of the run, e.g. tenant:acme (repeatable, at "
        "most 8)",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        metavar="N",
        help="1 (served first) to 5 (served last); default 3",
    )
    parser.add_argument(
        "--fairness-key",
        default=None,
        metavar="F",
        help="grants are shared fairly across the runs' fairness keys, e.g. the tenant",
    )
    parser.add_argument(
        "--budget-units",
        type=int,
        default=None,
        metavar="N",
        help="the run's budget of units (tokens...) over its whole life (default: no limit)",
    )
    parser.add_argument(
        "--budget-cost-micros",
        type=int,
        default=None,
        metavar="N",
        help="the run's budget of money, in millionths (default: no limit)",
    )
    parser.add_argument(
        "--on-budget-exceeded",
        choices=["wait", "fail"],
        default=None,
        help="when a step's estimate does not fit a budget: wait for room (default) or fail "
        "the step (BudgetExceeded)",
    )


def flow_options(args: argparse.Namespace) -> dict[str, Any]:
    """The start options the flags give, checked here: a bad value is a UsageError (exit 2)
    before anything is sent."""
    try:
        budget = None
        if args.budget_units is not None or args.budget_cost_micros is not None:
            budget = Budget(units=args.budget_units, cost_micros=args.budget_cost_micros)
        options: dict[str, Any] = {
            "keys": args.keys,
            "priority": args.priority,
            "fairness_key": args.fairness_key,
            "budget": budget,
            "on_budget_exceeded": args.on_budget_exceeded,
        }
        run_flow(**options)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    return options
