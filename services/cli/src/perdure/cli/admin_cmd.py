"""`perdure admin ...`: cluster administration through the gateway's AdminService. Each
subcommand is a module of its own (SUBCOMMANDS) with `add_parser(admin_subparsers)`, which
sets the `admin_run` its arguments are executed by."""

from __future__ import annotations

import argparse

from perdure.cli import admin_retention

SUBCOMMANDS = (admin_retention,)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `admin` and its subcommands."""
    parser = subparsers.add_parser("admin", help="administer the cluster")
    commands = parser.add_subparsers(dest="admin_command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(commands)


def run(args: argparse.Namespace) -> int:
    """Execute an `admin` subcommand; the exit code."""
    code: int = args.admin_run(args)
    return code
