"""Entry point of the history service: `perdure history` or `python -m perdure.history`."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Sequence

import grpc
import uvloop

from perdure.api.admin.v1.admin_service_pb2 import ROLE_WORKER
from perdure.api.worker.v1 import journal_service_pb2, journal_service_pb2_grpc
from perdure.common import limits
from perdure.common.auth import warn_if_open
from perdure.common.db import instrument_database, open_migrated_pool, open_pool, primary_reachable
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
from perdure.history.appends import DEFAULT_CRASH_LOOP_LIMIT
from perdure.history.approval_api import ApprovalServicer
from perdure.history.approvals import ApprovalWatch
from perdure.history.archive import ArchiveTarget, archiver
from perdure.history.commit_feed import CommitFeed
from perdure.history.deadlines import DeadlineWatch
from perdure.history.handlers import HistoryServicer, JournalServicer
from perdure.history.journal import Journal
from perdure.history.keys import KeyRing
from perdure.history.outbox import OutboxRelay
from perdure.history.relatives import Relatives
from perdure.history.retention import Retention, RetentionSettings
from perdure.history.schedule_api import ScheduleServicer
from perdure.history.schedule_firing import ScheduleFiring
from perdure.history.storage import StorageSampler, sample_interval
from perdure.history.stranded import StrandedSweep, stuck_after
from perdure.internal.history.v1 import (
    approval_service_pb2,
    approval_service_pb2_grpc,
    history_service_pb2,
    history_service_pb2_grpc,
    schedule_service_pb2,
    schedule_service_pb2_grpc,
)
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc
from perdure.telemetry import telemetry_for


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure history", description=__doc__)
    add_listen_flag(parser, "history")
    add_health_listen_flag(parser, "history")
    add_database_flag(parser, "history")
    add_address_flag(parser, "scheduler")
    parser.add_argument(
        "--crash-loop-limit",
        type=int,
        default=int(os.environ.get("PERDURE_CRASH_LOOP_LIMIT", DEFAULT_CRASH_LOOP_LIMIT)),
        help="times in a row a run may lose its worker without recording anything before it "
        f"is parked (PERDURE_CRASH_LOOP_LIMIT, default {DEFAULT_CRASH_LOOP_LIMIT})",
    )
    args = parser.parse_args(argv)
    if args.crash_loop_limit < 1:
        parser.error("--crash-loop-limit must be at least 1")
    return args


async def run(args: argparse.Namespace) -> None:
    """Migrate, then serve until SIGTERM."""
    pool = await open_migrated_pool("history", args.database_url)
    channel = service_channel(args.scheduler)
    scheduler = scheduler_service_pb2_grpc.SchedulerServiceStub(channel)
    relay = OutboxRelay(pool, scheduler)
    relatives = Relatives(pool, relay.notify)

    def scheduled() -> None:
        """A commit with outbox rows, maybe a close or a cancel request: relay and look."""
        relay.notify()
        relatives.notify()

    limits.payload_ref_bytes()  # a bad setting stops the start, not a write
    assert isinstance(pool.conninfo, str)  # open_pool passes the resolved DSN
    feed = CommitFeed(pool.conninfo)
    # The group commit writes one batch at a time: two connections are plenty.
    records_pool = await open_pool(
        pool.conninfo, max_size=2, generic_plans=True, name="perdure-history-records"
    )
    journal = Journal(
        pool,
        scheduled,
        args.crash_loop_limit,
        limits.journal_page_bytes(),
        on_committed=feed.committed,
        awaited=feed.awaited,
        records_pool=records_pool,
    )
    deadlines = DeadlineWatch(pool)
    approval_watch = ApprovalWatch(pool, relay.notify)
    sweep = StrandedSweep(pool, scheduler, relay.notify, stuck_after())
    sampler = StorageSampler(pool, sample_interval())
    journal_servicer = JournalServicer(
        journal,
        rate_setting("PERDURE_STREAM_MESSAGE_RATE", 5000.0),
        scheduler,
        LeaseProofs(InternalSecrets.from_env()),
    )
    key_ring = KeyRing(pool)
    # Closed runs go to PERDURE_ARCHIVE, when set, before retention deletes them.
    archive_target = ArchiveTarget.from_env()
    retention = Retention(
        pool,
        RetentionSettings.from_env(),
        archive=archiver(archive_target) if archive_target is not None else None,
    )
    await retention.prepare()
    firing = ScheduleFiring(journal)
    history_service = history_service_pb2.DESCRIPTOR.services_by_name["HistoryService"].full_name
    schedule_service = schedule_service_pb2.DESCRIPTOR.services_by_name[
        "HistoryScheduleService"
    ].full_name
    approval_service = approval_service_pb2.DESCRIPTOR.services_by_name[
        "HistoryApprovalService"
    ].full_name
    journal_service = journal_service_pb2.DESCRIPTOR.services_by_name["JournalService"].full_name
    warn_if_open("history")
    # Workers' journal calls carry their key; HistoryService answers only the gateway and the
    # scheduler, which prove they are services.
    guard = guards("history", key_ring.authenticate, {journal_service: ROLE_WORKER})

    def register(server: grpc.aio.Server) -> None:
        history_service_pb2_grpc.add_HistoryServiceServicer_to_server(
            HistoryServicer(journal, key_ring, feed), server
        )
        journal_service_pb2_grpc.add_JournalServiceServicer_to_server(journal_servicer, server)
        schedule_service_pb2_grpc.add_HistoryScheduleServiceServicer_to_server(
            ScheduleServicer(journal), server
        )
        approval_service_pb2_grpc.add_HistoryApprovalServiceServicer_to_server(
            ApprovalServicer(journal), server
        )

    async def started() -> None:
        feed.start()
        retention.start()
        relay.start()
        relatives.start()
        deadlines.start()
        approval_watch.start()
        sweep.start()
        firing.start()
        sampler.start()

    async def stopping() -> None:
        journal_servicer.close_sessions()  # workers' long-lived streams would hold the stop
        feed.close_watches()  # and so would clients' watches
        await sampler.stop()
        await firing.stop()
        await sweep.stop()
        await relatives.stop()
        await relay.stop()
        await deadlines.stop()
        await approval_watch.stop()
        await retention.stop()
        await feed.stop()

    try:
        await serve(
            ServerSpec(
                name="history",
                listen=args.listen,
                service_names=[
                    history_service,
                    journal_service,
                    schedule_service,
                    approval_service,
                ],
                interceptors=guard,
                register=register,
                require_client_auth=True,  # only services and workers call it
                health_listen=args.health_listen,
                ready=functools.partial(primary_reachable, pool),
                on_started=started,
                on_stopping=stopping,
            )
        )
    finally:
        await channel.close()
        await records_pool.close()
        await pool.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the history service."""
    args = parse_args(argv)
    with telemetry_for("perdure-history", on_enabled=instrument_database):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
