"""`perdure admin`: the cluster's administration, one module per subcommand."""

from __future__ import annotations

import argparse

from perdure.cli import admin_retention, admin_storage
from perdure.cli.flags import add_gateway_flags

# Each registers its subcommand with `add_parser(admin_subparsers)` and sets `admin_run`.
SUBCOMMANDS = (admin_retention, admin_storage)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `admin` and its subcommands."""
    parser = subparsers.add_parser("admin", help="administer the cluster: retention, storage")
    add_gateway_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(commands)


def run(args: argparse.Namespace) -> int:
    """Execute an `admin` subcommand; return the exit code."""
    code: int = args.admin_run(args)
    return code
