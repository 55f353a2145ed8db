"""A worker's plaintext grpc.health.v1 port, for probes: SERVING while it runs, NOT_SERVING
from the moment it starts draining."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

STOP_GRACE_SECONDS = 0.5


class HealthPort:
    """The health server of one worker process."""

    def __init__(self, listen: str) -> None:
        self._listen = listen
        self._server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])  # a taken port fails
        self._health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)

    async def start(self) -> None:
        """Listen and report SERVING; exit if the port is taken."""
        try:
            port = self._server.add_insecure_port(self._listen)
        except RuntimeError:
            port = 0
        if port == 0:
            raise SystemExit(f"worker: cannot listen on {self._listen} (is the port in use?)")
        await self._server.start()
        await self._health.set("", health_pb2.HealthCheckResponse.SERVING)

    async def draining(self) -> None:
        """Report NOT_SERVING: the worker takes no more tasks."""
        await self._health.enter_graceful_shutdown()

    async def stop(self) -> None:
        """Close the port."""
        await self._server.stop(STOP_GRACE_SECONDS)
