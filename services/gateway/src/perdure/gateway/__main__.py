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
from perdure.gateway.handlers import AdminServicer, Callers, WorkflowServicer
from perdure.gateway.http.server import HttpServer, instrument_http, local_target
from perdure.gateway.schedules import ScheduleServicer
from perdure.internal.history.v1 import approval_service_pb2_grpc as history_approvals
from perdure.internal.history.v1 import history_service_pb2_grpc
from perdure.internal.history.v1 import schedule_service_pb2_grpc as history_schedules
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc
from perdure.telemetry import telemetry_for


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure gateway", description=__doc__)
    add_listen_flag(parser, "gateway")
    add_health_listen_flag(parser, "gateway")
    add_address_flag(parser, "history")
    add_address_flag(parser, "scheduler")
    parser.add_argument(
        "--http-listen",
        default=os.environ.get("PERDURE_GATEWAY_HTTP_LISTEN", f"0.0.0.0:{GATEWAY_HTTP_PORT}"),
        help="host:port of the HTTP/JSON API and the web UI, or 'off' "
        f"(PERDURE_GATEWAY_HTTP_LISTEN, default 0.0.0.0:{GATEWAY_HTTP_PORT})",
    )
    return parser.parse_args(argv)


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
    history = service_channel(args.history)
    scheduler = service_channel(args.scheduler)
    history_stub = history_service_pb2_grpc.HistoryServiceStub(history)
    scheduler_stub = scheduler_service_pb2_grpc.SchedulerServiceStub(scheduler)
    callers = Callers(KeyedLimits(rate_setting("PERDURE_RATE_LIMIT", 500.0), "API key"))
    keys = RememberedKeys(history_authenticator(history_stub))
    servicer = WorkflowServicer(history_stub, scheduler_stub, callers)
    warn_if_open("gateway")
    http = (
        None
        if args.http_listen == "off"
        else HttpServer(args.http_listen, local_target(args.listen))
    )

    def register(server: grpc.aio.Server) -> None:
        workflow_service_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
        schedule_service_pb2_grpc.add_ScheduleServiceServicer_to_server(
            ScheduleServicer(
                history_schedules.HistoryScheduleServiceStub(history), servicer, callers
            ),
            server,
        )
        approval_service_pb2_grpc.add_ApprovalServiceServicer_to_server(
            ApprovalServicer(history_approvals.HistoryApprovalServiceStub(history), callers),
            server,
        )
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(
            AdminServicer(history_stub, scheduler_stub, callers, keys), server
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
        await history.close()
        await scheduler.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the gateway."""
    args = parse_args(argv)
    with telemetry_for("perdure-gateway", on_enabled=instrument_http):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
