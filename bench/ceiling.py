"""The physical floor on this machine: a durable single-row commit, and a gRPC round trip."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import grpc
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from bench.stats import summary_ms


def commits(dsn: str, connections: int, per_connection: int) -> dict[str, Any]:
    """INSERT + COMMIT of one row, in a loop on each of `connections` connections at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id bigserial PRIMARY KEY, v int)")
    latencies: list[float] = []
    lock = threading.Lock()

    def run() -> None:
        mine = []
        with psycopg.connect(dsn, autocommit=True) as conn:
            for value in range(per_connection):
                started = time.perf_counter()
                conn.execute("INSERT INTO bench_commit (v) VALUES (%s)", [value])
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {
        "connections": connections,
        "commits_per_s": round(len(latencies) / elapsed, 1),
        **summary_ms(latencies),
    }


def grpc_round_trips(calls: int) -> dict[str, Any]:
    """Sequential unary calls to an in-process grpc.aio server (the health check)."""
    return asyncio.run(_round_trips(calls))


async def _round_trips(calls: int) -> dict[str, Any]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest()
            await stub.Check(request)  # connect first
            latencies = []
            started = time.perf_counter()
            for _ in range(calls):
                before = time.perf_counter()
                await stub.Check(request)
                latencies.append(time.perf_counter() - before)
            elapsed = time.perf_counter() - started
    finally:
        await server.stop(None)
    return {"calls_per_s": round(calls / elapsed, 1), **summary_ms(latencies)}
