"""Entry point of the scheduler service: `perdure scheduler` or `python -m perdure.scheduler`."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

import grpc
import uvloop

from perdure.api.worker.v1 import task_service_pb2, task_service_pb2_grpc
from perdure.common.db import instrument_database, open_migrated_pool
from perdure.common.flags import add_database_flag, add_listen_flag
from perdure.common.grpc_server import ServerSpec, serve
from perdure.internal.scheduler.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc
from perdure.scheduler.dispatcher import Dispatcher
from perdure.scheduler.handlers import SchedulerServicer, TaskServicer
from perdure.scheduler.metrics import observe_backlog
from perdure.scheduler.store import TaskStore
from perdure.telemetry import telemetry_for


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure scheduler", description=__doc__)
    add_listen_flag(parser, "scheduler")
    add_database_flag(parser, "scheduler")
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=float(os.environ.get("PERDURE_LEASE_TTL", "10")),
        help="seconds a lease lasts without a heartbeat (PERDURE_LEASE_TTL, default 10)",
    )
    args = parser.parse_args(argv)
    if args.lease_ttl < 0.3:
        parser.error("--lease-ttl must be at least 0.3 seconds")
    return args


async def run(args: argparse.Namespace) -> None:
    """Migrate, then serve until SIGTERM."""
    pool = await open_migrated_pool("scheduler", args.database_url)
    store = TaskStore(pool)
    dispatcher = Dispatcher(store, args.lease_ttl)
    observe_backlog(store, asyncio.get_running_loop())

    def register(server: grpc.aio.Server) -> None:
        task_service_pb2_grpc.add_TaskServiceServicer_to_server(
            TaskServicer(store, dispatcher), server
        )
        scheduler_service_pb2_grpc.add_SchedulerServiceServicer_to_server(
            SchedulerServicer(store, dispatcher), server
        )

    async def started() -> None:
        dispatcher.start()

    try:
        await serve(
            ServerSpec(
                name="scheduler",
                listen=args.listen,
                service_names=[
                    task_service_pb2.DESCRIPTOR.services_by_name["TaskService"].full_name,
                    scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name,
                ],
                register=register,
                on_started=started,
                on_stopping=dispatcher.stop,
            )
        )
    finally:
        await pool.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the scheduler service."""
    args = parse_args(argv)
    with telemetry_for("perdure-scheduler", on_enabled=instrument_database):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
