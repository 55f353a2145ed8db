"""The architecture's floor: a bare journal service on the same PostgreSQL, what Perdure's
design cannot beat on this machine.

A grpc.aio server in a process of its own appends one record per call (a run's start, each
step's result, its close) to one table, with group commit as history has it (the records that
arrive during a write go together in the next: one INSERT, one commit, no waiting window), and
answers once the record is committed. A client in the benchmark's process plays the workflows:
a 10-step workflow is 12 sequential calls (start, 10 steps, close). No leases, no scheduler,
no replay, no authentication: each call is one gRPC round trip and one durable commit, the
least a durable step can cost through a service.

`python -m bench.floor --dsn DSN --listen HOST:PORT` serves; `measure` runs the shapes.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from typing import Any

import grpc
import psycopg
import uvloop

from bench.stats import rates, summary_ms

METHOD = "/perdure.bench.Floor/Append"
STARTUP_TIMEOUT = 30.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_floor (
    run_id text NOT NULL, seq int NOT NULL, record bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (run_id, seq))
"""
_APPEND = """
INSERT INTO bench_floor (run_id, seq, record)
SELECT * FROM unnest(%s::text[], %s::int[], %s::bytea[])
"""


class GroupCommit:
    """Appends records in batches, one batch at a time, each as one INSERT and one commit."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn
        self._queue: list[tuple[str, int, bytes, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, run_id: str, seq: int, record: bytes) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((run_id, seq, record, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        await done

    async def _write_queued(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            columns = [list(column) for column in zip(*(item[:3] for item in batch), strict=True)]
            try:
                await self._conn.execute(_APPEND, columns)
            except psycopg.Error as error:
                for *_, done in batch:
                    done.set_exception(error)
                continue
            for *_, done in batch:
                done.set_result(None)


async def serve(dsn: str, listen: str) -> None:
    """Serve Append until killed."""
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await conn.execute(_SCHEMA)
    journal = GroupCommit(conn)

    async def append(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        head, _, record = request.partition(b"\n")  # "<run id>\t<seq>\n<record>"
        run_id, _, seq = head.decode().partition("\t")
        await journal.append(run_id, int(seq), record)
        return b""

    server = grpc.aio.server()
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(append)
    service, _, method = METHOD.strip("/").partition("/")
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service, {method: handler}),)
    )
    server.add_insecure_port(listen)
    await server.start()
    await server.wait_for_termination()


class Client:
    """Workflows played against the floor service: each record a call, in order."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.aio.insecure_channel(address)
        self._append: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = self._channel.unary_unary(
            METHOD
        )

    async def ready(self) -> None:
        await asyncio.wait_for(self._channel.channel_ready(), STARTUP_TIMEOUT)
        await self.workflow("warm-up", 1)

    async def workflow(self, run_id: str, steps: int) -> None:
        """Start, `steps` steps, close: each record committed before the next is sent."""
        for seq in range(steps + 2):
            await self._append(f"{run_id}\t{seq}\n".encode() + b"{}", timeout=STARTUP_TIMEOUT)

    async def close(self) -> None:
        await self._channel.close()


async def _measure(address: str, runs: int, workflows: int, in_flight: int) -> dict[str, Any]:
    client = Client(address)
    try:
        await client.ready()
        durations: dict[int, list[float]] = {0: [], 10: []}
        for index in range(runs * 2):
            steps = 10 if index % 2 else 0
            started = time.perf_counter()
            await client.workflow(f"lat{steps}-{index}", steps)
            durations[steps].append(time.perf_counter() - started)
        ten, empty = summary_ms(durations[10]), summary_ms(durations[0])
        pending = iter(range(workflows))

        async def player() -> None:
            for index in pending:
                await client.workflow(f"tp-{index}", 10)

        started = time.perf_counter()
        await asyncio.gather(*(player() for _ in range(in_flight)))
        span = time.perf_counter() - started
    finally:
        await client.close()
    return {
        "ten_steps": ten,
        "start_complete": empty,
        "per_step_ms": round((ten["median_ms"] - empty["median_ms"]) / 10, 3),
        "throughput": {**rates(workflows, 10, span), "in_flight": in_flight},
    }


def measure(dsn: str, runs: int, workflows: int, in_flight: int) -> dict[str, Any]:
    """Start the floor service on a free port, play `runs` workflows of 10 and of 0 steps one at a
    time and `workflows` of 10 steps with `in_flight` at once; stop it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "--dsn", dsn, "--listen", address],
        stdout=subprocess.DEVNULL,
    )
    try:
        return uvloop.run(_measure(address, runs, workflows, in_flight))
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--listen", required=True)
    args = parser.parse_args()
    uvloop.run(serve(args.dsn, args.listen))


if __name__ == "__main__":
    main()
