"""Waiting for a gRPC server to report SERVING on grpc.health.v1."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.telemetry.rpc import sync_channel

# Ask again within 0.1 s of a refusal: gRPC's default reconnect backoff (1 s, growing 1.6
# times) would find a server up to seconds after it started serving.
PROBE_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 100),
]


def wait_serving(
    address: str, timeout: float, *, still_running: Callable[[], bool], plaintext: bool = False
) -> None:
    """Block until the server at `address` reports SERVING.

    The channel is TLS when this process has PERDURE_TLS_CA set, like every other channel;
    `plaintext=True` is for a service's plaintext health port (--health-listen).

    Raises:
        RuntimeError: as soon as `still_running()` is false (the process died starting up).
        TimeoutError: after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    channel = (
        grpc.insecure_channel(address, options=PROBE_OPTIONS)
        if plaintext
        else sync_channel(address, PROBE_OPTIONS, traced=False)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if not still_running():
                raise RuntimeError(f"the server for {address} exited while starting")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} did not report SERVING within {timeout:.0f}s")
            time.sleep(0.05)
