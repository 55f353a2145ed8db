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
from perdure.common.tls import server_credentials
from perdure.telemetry.rpc import MESSAGE_LIMITS, server_interceptors

log = logging.getLogger(__name__)

# Keepalives find dead peers (a killed worker behind a half-open connection) in seconds.
SERVER_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    # Clients connect anew after about 5 minutes (calls under way go on), resolving the
    # service's name again: new replicas get their share of calls. Long streams move on their
    # own terms (a worker's session, after --session-max-age).
    ("grpc.max_connection_age_ms", 300_000),
    *MESSAGE_LIMITS,
    # A port already in use is an error, not a port silently shared with another server.
    ("grpc.so_reuseport", 0),
]

# A probe's Check under way when the service stops gets its answer; Watch streams get their
# NOT_SERVING and are then cut.
HEALTH_GRACE_SECONDS = 0.5

# How often a service with a readiness check (ServerSpec.ready) asks it: a failover shows in
# its health within seconds, at one cheap query per interval.
READY_INTERVAL_SECONDS = 2.0


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
    # With TLS on (PERDURE_TLS_CERT/KEY): refuse clients without a certificate the CA signed.
    require_client_auth: bool = True
    # host:port of a plaintext port serving only grpc.health.v1 (for probes), or None.
    health_listen: str | None = None
    # Checks after tracing's (an API key check, say): a refused call is traced too.
    interceptors: Sequence[grpc.aio.ServerInterceptor] = ()
    # Whether the service can do its work now (its database's primary is reachable, say):
    # asked every READY_INTERVAL_SECONDS once started; while not, health reports NOT_SERVING
    # for the services by name (what readiness probes ask), still SERVING for "" (the process
    # is alive: what liveness probes ask, so a database outage restarts nothing).
    ready: Callable[[], Awaitable[bool]] | None = None


def _add_port(
    server: grpc.aio.Server, name: str, listen: str, credentials: grpc.ServerCredentials | None
) -> int:
    """Listen on `listen` (TLS with `credentials`, else plaintext); exit if the port is taken."""
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        raise SystemExit(f"{name}: cannot listen on {listen} (is the port in use?)")
    return port


def _shown(listen: str, port: int) -> str:
    """`listen` with the port actually bound (`:0` asks for any free one)."""
    return listen.rsplit(":", 1)[0] + f":{port}"


async def serve(spec: ServerSpec) -> None:
    """Run the server until SIGTERM or SIGINT, then drain: NOT_SERVING, stop work, stop."""
    credentials = server_credentials(spec.name, spec.require_client_auth)
    server = grpc.aio.server(
        options=SERVER_OPTIONS, interceptors=[*server_interceptors(), *spec.interceptors]
    )
    spec.register(TolerantServer(server))  # type: ignore[arg-type]
    health = HealthServicer()
    # The servicer starts out SERVING; probes must not see that before on_started is done.
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
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
    port = _add_port(server, spec.name, spec.listen, credentials)
    # Probes reach the health port without certificates; it shares `health`, so it reports
    # NOT_SERVING as soon as the service starts draining.
    health_server: grpc.aio.Server | None = None
    if spec.health_listen is not None:
        health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(health, health_server)
        health_port = _add_port(health_server, spec.name, spec.health_listen, None)
        await health_server.start()
        log.info("%s health on %s", spec.name, _shown(spec.health_listen, health_port))
    await server.start()
    if spec.on_started is not None:
        await spec.on_started()
    for name in ["", *spec.service_names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    watching = asyncio.create_task(_watch_ready(health, spec), name="readiness")
    log.info(
        "%s listening on %s (%s)",
        spec.name,
        _shown(spec.listen, port),
        "plaintext" if credentials is None else "TLS",
    )

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()

    log.info("%s shutting down", spec.name)
    watching.cancel()
    await health.enter_graceful_shutdown()
    # New calls are refused from here on, calls under way go on for the grace period: a stream
    # opened while the service winds its work down would hold the stop for the whole grace.
    stopped = asyncio.create_task(server.stop(spec.grace_seconds))
    if spec.on_stopping is not None:
        await spec.on_stopping()
    await stopped
    if health_server is not None:
        await health_server.stop(HEALTH_GRACE_SECONDS)
    log.info("%s stopped", spec.name)


async def _report(health: HealthServicer, spec: ServerSpec, *, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in spec.service_names:
        await health.set(name, status)


async def _watch_ready(health: HealthServicer, spec: ServerSpec) -> None:
    """Follow spec.ready: NOT_SERVING while the service cannot work, SERVING once it can."""
    if spec.ready is None:
        return
    serving = True
    while True:
        await asyncio.sleep(READY_INTERVAL_SECONDS)
        ready = await spec.ready()
        if ready != serving:
            serving = ready
            await _report(health, spec, serving=serving)
            log.log(
                logging.INFO if ready else logging.WARNING,
                "%s %s",
                spec.name,
                "ready again" if ready else "not ready (is its database's primary reachable?)",
            )
