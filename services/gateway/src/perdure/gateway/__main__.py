"""Entry point of the gateway: `perdure gateway` or `python -m perdure.gateway`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import grpc
import uvloop

from perdure.api.workflow.v1 import workflow_service_pb2, workflow_service_pb2_grpc
from perdure.common.flags import add_address_flag, add_listen_flag
from perdure.common.grpc_server import ServerSpec, serve
from perdure.gateway.handlers import WorkflowServicer
from perdure.internal.history.v1 import history_service_pb2_grpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc
from perdure.telemetry import telemetry_for
from perdure.telemetry.rpc import aio_channel


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure gateway", description=__doc__)
    add_listen_flag(parser, "gateway")
    add_address_flag(parser, "history")
    add_address_flag(parser, "scheduler")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    """Serve until SIGTERM."""
    history = aio_channel(args.history)
    scheduler = aio_channel(args.scheduler)
    servicer = WorkflowServicer(
        history_service_pb2_grpc.HistoryServiceStub(history),
        scheduler_service_pb2_grpc.SchedulerServiceStub(scheduler),
    )

    def register(server: grpc.aio.Server) -> None:
        workflow_service_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)

    try:
        await serve(
            ServerSpec(
                name="gateway",
                listen=args.listen,
                service_names=[
                    workflow_service_pb2.DESCRIPTOR.services_by_name["WorkflowService"].full_name
                ],
                register=register,
            )
        )
    finally:
        await history.close()
        await scheduler.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the gateway."""
    args = parse_args(argv)
    with telemetry_for("perdure-gateway"):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
