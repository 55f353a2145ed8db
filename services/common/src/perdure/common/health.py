"""Waiting for a gRPC server to report SERVING on grpc.health.v1."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def wait_serving(address: str, timeout: float, *, still_running: Callable[[], bool]) -> None:
    """Block until the server at `address` reports SERVING.

    Raises:
        RuntimeError: as soon as `still_running()` is false (the process died starting up).
        TimeoutError: after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
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
