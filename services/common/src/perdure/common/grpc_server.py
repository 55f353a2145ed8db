"""Serve a gRPC service with health checking, reflection and a graceful SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from perdure.common.decoding import TolerantServer
from perdure.telemetry.rpc import server_interceptors

log = logging.getLogger(__name__)

# Keepalives find dead peers (a killed worker behind a half-open connection) in seconds.
SERVER_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


def reflection_enabled() -> bool:
    """Server reflection (what `grpcurl list` and `describe` use): PERDURE_REFLECTION=on, the
    default, or off, for deployments that should not describe themselves to anyone."""
    setting = os.environ.get("PERDURE_REFLECTION", "on").strip().lower()
    if setting not in ("on", "off"):
        raise SystemExit(f"PERDURE_REFLECTION must be on or off, not {setting!r}")
    return setting == "on"


@dataclass
class ServerSpec:
    """What one service process serves and how it starts and stops its own work."""

    name: str
    listen: str
    service_names: Sequence[str]
    register: Callable[[grpc.aio.Server], None]
    on_started: Callable[[], Awaitable[None]] | None = None
    on_stopping: Callable[[], Awaitable[None]] | None = None
    grace_seconds: float = 10.0


async def serve(spec: ServerSpec) -> None:
    """Run the server until SIGTERM or SIGINT, then drain: NOT_SERVING, stop work, stop."""
    server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=server_interceptors())
    spec.register(TolerantServer(server))  # type: ignore[arg-type]
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if reflection_enabled():
        reflection.enable_server_reflection(
            [
                *spec.service_names,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            server,
        )
    try:
        port = server.add_insecure_port(spec.listen)
    except RuntimeError:
        port = 0
    if port == 0:
        raise SystemExit(f"{spec.name}: cannot listen on {spec.listen} (is the port in use?)")
    await server.start()
    if spec.on_started is not None:
        await spec.on_started()
    for name in ["", *spec.service_names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("%s listening on %s", spec.name, spec.listen.rsplit(":", 1)[0] + f":{port}")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()

    log.info("%s shutting down", spec.name)
    await health.enter_graceful_shutdown()
    # New calls are refused from here on, calls under way go on for the grace period: a stream
    # opened while the service winds its work down would hold the stop for the whole grace.
    stopped = asyncio.create_task(server.stop(spec.grace_seconds))
    if spec.on_stopping is not None:
        await spec.on_stopping()
    await stopped
    log.info("%s stopped", spec.name)
