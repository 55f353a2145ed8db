"""Entry point of the gateway: `perdure gateway` or `python -m perdure.gateway`."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import grpc
import uvloop

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc
from perdure.api.workflow.v1 import (
    approval_service_pb2,
    approval_service_pb2_grpc,
    schedule_service_pb2,
    schedule_service_pb2_grpc,
    workflow_service_pb2,
    workflow_service_pb2_grpc,
)
from perdure.common.auth import RememberedKeys, history_authenticator, warn_if_open
from perdure.common.flags import (
    GATEWAY_HTTP_PORT,
    add_address_flag,
    add_health_listen_flag,
    add_listen_flag,
)
from perdure.common.grpc_server import ServerSpec, serve
from perdure.common.guard import guards
from perdure.common.limits import KeyedLimits, rate_setting
from perdure.common.service_identity import service_channel
from perdure.common.tls import gateway_requires_client_cert
from perdure.gateway.approvals import ApprovalServicer
from perdure.gateway.cells import Cell, CellAddress, Router, parse_cells
from perdure.gateway.directory import Directory
from perdure.gateway.handlers import AdminServicer, Callers, WorkflowServicer
from perdure.gateway.http.server import HttpServer, instrument_http, local_target
from perdure.gateway.schedules import ScheduleServicer
from perdure.telemetry import telemetry_for


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure gateway", description=__doc__)
    add_listen_flag(parser, "gateway")
    add_health_listen_flag(parser, "gateway")
    add_address_flag(parser, "history")
    add_address_flag(parser, "scheduler")
    parser.add_argument(
        "--cells",
        default=os.environ.get("PERDURE_CELLS", ""),
        help="several cells, each a database with its own history and scheduler: "
        "'name=history_address/scheduler_address' entries separated by ';' (PERDURE_CELLS; "
        "replaces --history-address and --scheduler-address; needs "
        "--directory-database-url). Unset: one cell, as always",
    )
    parser.add_argument(
        "--directory-database-url",
        default=os.environ.get("PERDURE_DIRECTORY_DATABASE_URL", ""),
        help="the database recording which cell each run lives in (PERDURE_DIRECTORY_"
        "DATABASE_URL; with --cells only)",
    )
    parser.add_argument(
        "--http-listen",
        default=os.environ.get("PERDURE_GATEWAY_HTTP_LISTEN", f"0.0.0.0:{GATEWAY_HTTP_PORT}"),
        help="host:port of the HTTP/JSON API and the web UI, or 'off' "
        f"(PERDURE_GATEWAY_HTTP_LISTEN, default 0.0.0.0:{GATEWAY_HTTP_PORT})",
    )
    args = parser.parse_args(argv)
    try:
        args.cell_addresses = parse_cells(args.cells) if args.cells.strip() else None
    except ValueError as error:
        parser.error(f"--cells (PERDURE_CELLS): {error}")
    if args.cell_addresses and len(args.cell_addresses) > 1 and not args.directory_database_url:
        parser.error(
            "several cells need a directory: set PERDURE_DIRECTORY_DATABASE_URL (or "
            "--directory-database-url) to a PostgreSQL database the gateways share (a database "
            "of its own, or the first cell's: the directory keeps to schema 'directory')"
        )
    return args


WORKFLOW_SERVICE = workflow_service_pb2.DESCRIPTOR.services_by_name["WorkflowService"].full_name
APPROVAL_SERVICE = approval_service_pb2.DESCRIPTOR.services_by_name["ApprovalService"].full_name
SCHEDULE_SERVICE = schedule_service_pb2.DESCRIPTOR.services_by_name["ScheduleService"].full_name
ADMIN_SERVICE = admin.DESCRIPTOR.services_by_name["AdminService"].full_name
# Reading needs a reader key; changing a run, routing, pauses, limits or budgets, an
# operator's; AdminService's other calls an admin's.
READER_ADMIN_METHODS = (
    "ListWorkflowPolicies",
    "ListWorkers",
    "ListBuilds",
    "ListPauses",
    "ListFlowLimits",
    "ListBudgets",
    "GetStorage",
    "ExportWorkflow",
    "GetRetention",
)
OPERATOR_ADMIN_METHODS = (
    "SetWorkflowPolicy",
    "Pause",
    "Unpause",
    "SetFlowLimit",
    "DeleteFlowLimit",
    "SetBudget",
    "DeleteBudget",
)
OPERATOR_METHODS = (
    "StartWorkflow",
    "SignalWorkflow",
    "SignalWithStartWorkflow",
    "CancelWorkflow",
    "TerminateWorkflow",
    "ResumeWorkflow",
    "ResetWorkflow",
    "ForkWorkflow",
)
# Schedules: reading them needs a reader key, changing them an operator's.
OPERATOR_SCHEDULE_METHODS = (
    "CreateSchedule",
    "PauseSchedule",
    "UnpauseSchedule",
    "TriggerSchedule",
    "DeleteSchedule",
)


ROLES = {
    WORKFLOW_SERVICE: admin.ROLE_READER,
    **{f"/{WORKFLOW_SERVICE}/{method}": admin.ROLE_OPERATOR for method in OPERATOR_METHODS},
    SCHEDULE_SERVICE: admin.ROLE_READER,
    # Approvals: any non-worker key reads them; history decides who may decide each one.
    APPROVAL_SERVICE: admin.ROLE_READER,
    **{
        f"/{SCHEDULE_SERVICE}/{method}": admin.ROLE_OPERATOR for method in OPERATOR_SCHEDULE_METHODS
    },
    ADMIN_SERVICE: admin.ROLE_ADMIN,
    **{f"/{ADMIN_SERVICE}/{method}": admin.ROLE_READER for method in READER_ADMIN_METHODS},
    **{f"/{ADMIN_SERVICE}/{method}": admin.ROLE_OPERATOR for method in OPERATOR_ADMIN_METHODS},
}


async def run(args: argparse.Namespace) -> None:
    """Serve until SIGTERM."""
    addresses: list[CellAddress] = args.cell_addresses or [
        CellAddress("default", args.history, args.scheduler)
    ]
    channels = [
        (service_channel(cell.history), service_channel(cell.scheduler)) for cell in addresses
    ]
    named = len(addresses) > 1
    cells = [
        Cell.of(address.name, history, scheduler, named)
        for address, (history, scheduler) in zip(addresses, channels, strict=True)
    ]
    directory = await Directory.open(args.directory_database_url) if named else None
    router = Router(cells, directory)
    callers = Callers(KeyedLimits(rate_setting("PERDURE_RATE_LIMIT", 500.0), "API key"))
    # Keys are checked against the first cell's history (keys must be valid in every cell:
    # each cell's history and scheduler check its workers' against its own database).
    keys = RememberedKeys(history_authenticator(router.home.history))
    servicer = WorkflowServicer(router, callers)
    warn_if_open("gateway")
    http = (
        None
        if args.http_listen == "off"
        else HttpServer(args.http_listen, local_target(args.listen))
    )

    def register(server: grpc.aio.Server) -> None:
        workflow_service_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
        schedule_service_pb2_grpc.add_ScheduleServiceServicer_to_server(
            ScheduleServicer(router, servicer, callers), server
        )
        approval_service_pb2_grpc.add_ApprovalServiceServicer_to_server(
            ApprovalServicer(router, callers), server
        )
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(
            AdminServicer(router, callers, keys), server
        )

    try:
        await serve(
            ServerSpec(
                name="gateway",
                listen=args.listen,
                service_names=[WORKFLOW_SERVICE, SCHEDULE_SERVICE, ADMIN_SERVICE, APPROVAL_SERVICE],
                register=register,
                interceptors=guards("gateway", keys.authenticate, ROLES),
                require_client_auth=gateway_requires_client_cert(),
                health_listen=args.health_listen,
                on_started=http.start if http else None,
                on_stopping=http.stop if http else None,
            )
        )
    finally:
        for history, scheduler in channels:
            await history.close()
            await scheduler.close()
        if directory is not None:
            await directory.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the gateway."""
    args = parse_args(argv)
    with telemetry_for("perdure-gateway", on_enabled=instrument_http):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
