"""The `perdure` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from perdure.cli import (
    certs_cmd,
    dev_cmd,
    keys_cmd,
    migrate_cmd,
    replay_cmd,
    workers_cmd,
    workflow_cmd,
)

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
    args = parser.parse_args(args_list)
    if args.group == "dev":
        sys.exit(dev_cmd.run(args))
    if args.group == "certs":
        sys.exit(certs_cmd.run(args))
    if args.group in ("keys", "audit"):
        sys.exit(keys_cmd.run(args))
    if args.group == "migrate":
        sys.exit(migrate_cmd.run(args))
    if args.group == "replay":
        sys.exit(replay_cmd.run(args))
    if args.group == "workers":
        sys.exit(workers_cmd.run(args))
    sys.exit(workflow_cmd.run(args))


if __name__ == "__main__":
    main()
