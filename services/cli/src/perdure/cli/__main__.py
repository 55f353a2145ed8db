"""The `perdure` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import grpc

from perdure.cli import (
    admin_cmd,
    approvals_cmd,
    certs_cmd,
    dev_cmd,
    flow_cmd,
    keys_cmd,
    migrate_cmd,
    pause_cmd,
    replay_cmd,
    schedule_cmd,
    workers_cmd,
    workflow_cmd,
)
from perdure.cli.errors import print_rpc_error
from perdure.cli.flags import UsageError

SERVICES = ("gateway", "history", "scheduler", "worker")


def _service_main(name: str) -> Callable[[list[str]], None]:
    # Imported on demand: `perdure worker` must not load the server packages, nor the reverse.
    if name == "gateway":
        from perdure.gateway.__main__ import main as gateway_main

        return gateway_main
    if name == "history":
        from perdure.history.__main__ import main as history_main

        return history_main
    if name == "scheduler":
        from perdure.scheduler.__main__ import main as scheduler_main

        return scheduler_main
    from perdure.worker.__main__ import main as worker_main

    return worker_main


def main(argv: Sequence[str] | None = None) -> None:
    """Dispatch to a service, the local cluster, or a workflow command."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in SERVICES:
        _service_main(args_list[0])(args_list[1:])
        return
    try:
        code = _command(args_list)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        sys.exit(code)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except grpc.RpcError as error:
        sys.exit(print_rpc_error(error))
    except BrokenPipeError:
        # The reader left (`perdure workflow list | head -1`): stop quietly, as a shell tool
        # does on SIGPIPE, with nothing more to flush into the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(PIPE_CLOSED_EXIT)
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED_EXIT)


PIPE_CLOSED_EXIT = 128 + 13  # killed by SIGPIPE, as `yes | head -1` reports it
INTERRUPTED_EXIT = 128 + 2  # Ctrl-C


def _command(args_list: list[str]) -> int:
    """Run a command other than a service; its exit code."""
    parser = argparse.ArgumentParser(
        prog="perdure",
        description="Perdure: durable workflows. Services: perdure gateway|history|scheduler|"
        "worker [--help].",
    )
    subparsers = parser.add_subparsers(dest="group", required=True)
    for name in SERVICES:
        subparsers.add_parser(name, help=f"run the {name}", add_help=False)
    dev_cmd.add_parser(subparsers)
    certs_cmd.add_parser(subparsers)
    workflow_cmd.add_parser(subparsers)
    keys_cmd.add_parser(subparsers)
    migrate_cmd.add_parser(subparsers)
    replay_cmd.add_parser(subparsers)
    workers_cmd.add_parser(subparsers)
    flow_cmd.add_parser(subparsers)
    pause_cmd.add_parser(subparsers)
    schedule_cmd.add_parser(subparsers)
    approvals_cmd.add_parser(subparsers)
    admin_cmd.add_parser(subparsers)
    args = parser.parse_args(args_list)
    if args.group == "dev":
        return dev_cmd.run(args)
    if args.group == "certs":
        return certs_cmd.run(args)
    if args.group in ("keys", "audit"):
        return keys_cmd.run(args)
    if args.group == "migrate":
        return migrate_cmd.run(args)
    if args.group == "replay":
        return replay_cmd.run(args)
    if args.group == "workers":
        return workers_cmd.run(args)
    if args.group in ("limits", "budgets"):
        return flow_cmd.run(args)
    if args.group in pause_cmd.GROUPS:
        return pause_cmd.run(args)
    if args.group == "schedule":
        return schedule_cmd.run(args)
    if args.group in approvals_cmd.GROUPS:
        return approvals_cmd.run(args)
    if args.group == "admin":
        return admin_cmd.run(args)
    return workflow_cmd.run(args)


if __name__ == "__main__":
    main()
