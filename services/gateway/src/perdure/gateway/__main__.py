"""Entry point of the gateway: `perdure gateway` or `python -m perdure.gateway`."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

import grpc

from perdure.api.workflow.v1 import workflow_service_pb2, workflow_service_pb2_grpc
from perdure.common.grpc_server import ServerSpec, serve
from perdure.common.logs import configure_logging
from perdure.gateway.handlers import WorkflowServicer
from perdure.internal.history.v1 import history_service_pb2_grpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags win over PERDURE_* environment variables, which win over defaults."""
    parser = argparse.ArgumentParser(prog="perdure gateway", description=__doc__)
    parser.add_argument(
        "--listen",
        default=os.environ.get("PERDURE_GATEWAY_LISTEN", "0.0.0.0:7400"),
        help="host:port to serve on (PERDURE_GATEWAY_LISTEN, default 0.0.0.0:7400)",
    )
    parser.add_argument(
        "--history",
        default=os.environ.get("PERDURE_HISTORY_ADDRESS", "localhost:7401"),
        help="history address (PERDURE_HISTORY_ADDRESS, default localhost:7401)",
    )
    parser.add_argument(
        "--scheduler",
        default=os.environ.get("PERDURE_SCHEDULER_ADDRESS", "localhost:7402"),
        help="scheduler address (PERDURE_SCHEDULER_ADDRESS, default localhost:7402)",
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    """Serve until SIGTERM."""
    history = grpc.aio.insecure_channel(args.history)
    scheduler = grpc.aio.insecure_channel(args.scheduler)
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
    configure_logging("gateway")
    asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()
