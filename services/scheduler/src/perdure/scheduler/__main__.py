"""Entry point of the scheduler service: `perdure scheduler` or `python -m perdure.scheduler`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
from collections.abc import Sequence

import grpc
import uvloop

from perdure.api.admin.v1.admin_service_pb2 import ROLE_WORKER
from perdure.api.worker.v1 import task_service_pb2, task_service_pb2_grpc
from perdure.common.auth import RememberedKeys, history_authenticator, warn_if_open
from perdure.common.db import instrument_database, open_migrated_pool, primary_reachable
from perdure.common.flags import (
    add_address_flag,
    add_database_flag,
    add_health_listen_flag,
    add_listen_flag,
)
from perdure.common.grpc_server import ServerSpec, serve
from perdure.common.guard import guards
from perdure.common.lease_proofs import LeaseProofs
from perdure.common.limits import rate_setting
from perdure.common.service_identity import InternalSecrets, service_channel
from perdure.internal.history.v1 import history_service_pb2_grpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc
from perdure.scheduler.dispatcher import Dispatcher
from perdure.scheduler.handlers import SchedulerServicer, TaskServicer
from perdure.scheduler.metrics import observe_backlog, observe_pauses
from perdure.scheduler.sticky import DEFAULT_STICKY_TIMEOUT
from perdure.scheduler.store import TaskStore
from perdure.telemetry import telemetry_for

TASK_SERVICE = task_service_pb2.DESCRIPTOR.services_by_name["TaskService"].full_name
SCHEDULER_SERVICE = scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure scheduler", description=__doc__)
    add_listen_flag(parser, "scheduler")
    add_health_listen_flag(parser, "scheduler")
    add_database_flag(parser, "scheduler")
    add_address_flag(parser, "history")  # where worker keys are checked
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=float(os.environ.get("PERDURE_LEASE_TTL", "10")),
        help="seconds a lease lasts without a heartbeat (PERDURE_LEASE_TTL, default 10)",
    )
    parser.add_argument(
        "--session-max-age",
        type=float,
        default=float(os.environ.get("PERDURE_SESSION_MAX_AGE", "300")),
        help="seconds after which a worker session moves, with its leases, so that new "
        "replicas get their share (PERDURE_SESSION_MAX_AGE, default 300; 0: never)",
    )
    parser.add_argument(
        "--sticky-timeout",
        type=float,
        default=float(os.environ.get("PERDURE_STICKY_TIMEOUT", str(DEFAULT_STICKY_TIMEOUT))),
        help="seconds a due task waits for the worker that keeps its run's state before any "
        "worker may take it (PERDURE_STICKY_TIMEOUT, default 1; 0: stickiness off)",
    )
    args = parser.parse_args(argv)
    if args.sticky_timeout < 0:
        parser.error("--sticky-timeout must be 0 (off) or a positive number of seconds")
    if args.lease_ttl < 0.3:
        parser.error("--lease-ttl must be at least 0.3 seconds")
    if args.session_max_age < 0:
        parser.error("--session-max-age must be 0 (never) or a positive number of seconds")
    return args


async def run(args: argparse.Namespace) -> None:
    """Migrate, then serve until SIGTERM."""
    pool = await open_migrated_pool("scheduler", args.database_url)
    store = TaskStore(pool)
    proofs = LeaseProofs(InternalSecrets.from_env())
    dispatcher = Dispatcher(store, args.lease_ttl, args.sticky_timeout, proofs)
    observe_backlog(store, asyncio.get_running_loop())
    observe_pauses(store, asyncio.get_running_loop())
    history = service_channel(args.history)
    keys = RememberedKeys(
        history_authenticator(history_service_pb2_grpc.HistoryServiceStub(history))
    )
    warn_if_open("scheduler")
    # Workers connect with their key; SchedulerService answers only history and the gateway,
    # which prove they are services.
    guard = guards("scheduler", keys.authenticate, {TASK_SERVICE: ROLE_WORKER})
    message_rate = rate_setting("PERDURE_STREAM_MESSAGE_RATE", 5000.0)

    def register(server: grpc.aio.Server) -> None:
        task_service_pb2_grpc.add_TaskServiceServicer_to_server(
            TaskServicer(store, dispatcher, message_rate, args.session_max_age),
            server,
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
                service_names=[TASK_SERVICE, SCHEDULER_SERVICE],
                register=register,
                interceptors=guard,
                require_client_auth=True,  # only services and workers call it
                health_listen=args.health_listen,
                ready=functools.partial(primary_reachable, pool),
                on_started=started,
                on_stopping=dispatcher.stop,
            )
        )
    finally:
        await history.close()
        await pool.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the scheduler service."""
    args = parse_args(argv)
    with telemetry_for("perdure-scheduler", on_enabled=instrument_database):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
