"""The result's path with nothing on it: what `result latency` (streams.py) cannot go below on
this machine, whatever Perdure does.

A run's result reaches its client over four one-way hops between three processes: the start
goes client → gateway → history, the answer history → gateway → client. Here three bare
processes make the same hops with the same wait between them: the bench (a synchronous
client, as perdure.client is) calls a forwarder (grpc.aio, the gateway's part), which calls an
end (grpc.aio, history's part). The end answers the start at once, stamping it "created"; it
answers the wait after `idle` seconds, as long as the run took, stamping it "closed". What the
client's start → answer takes beyond closed - created is the hops' own cost: no database, no
validation, no authentication, no serialisation beyond a few bytes.

The wait matters: processes idle through a run wake slower than busy ones (a halted virtual
CPU is woken by the host), so a hop after 45 ms of quiet costs more than one in a tight loop.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import struct
import time
from multiprocessing.connection import Connection
from typing import Any

import grpc

from bench.stats import summary_ms

METHOD = "/bench.Hop/Call"
WARM_UP = 20
_STAMP = struct.Struct("!d")


def _identity(data: bytes) -> bytes:
    return data


def _serve(forward_to: str | None, ready: Connection) -> None:
    """Serve METHOD: forward the request to `forward_to`, or (the end) answer it."""
    asyncio.run(_served(forward_to, ready))


async def _served(forward_to: str | None, ready: Connection) -> None:
    if forward_to is None:

        async def answer(request: bytes, context: Any) -> bytes:
            idle = _STAMP.unpack(request)[0]
            if idle > 0:
                await asyncio.sleep(idle)
            return _STAMP.pack(time.time())

    else:
        channel = grpc.aio.insecure_channel(forward_to)
        call = channel.unary_unary(METHOD, _identity, _identity)

        async def answer(request: bytes, context: Any) -> bytes:
            answered: bytes = await call(request)
            return answered

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(answer, _identity, _identity)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Hop", {"Call": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ready.send(port)
    await server.wait_for_termination()


def _start(forward_to: str | None) -> tuple[multiprocessing.process.BaseProcess, str]:
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(forward_to, sending), daemon=True)
    process.start()
    if not receiving.poll(60):
        process.kill()
        raise RuntimeError("a hop process did not start within 60 s")
    return process, f"127.0.0.1:{receiving.recv()}"


def measure(runs: int, idle: float) -> dict[str, Any]:
    """`runs` starts and waits, one at a time, each wait `idle` seconds long at the end: the
    client's start → answer beyond the end's own created → closed."""
    end, end_address = _start(None)
    forwarder, address = _start(end_address)
    added = []
    try:
        with grpc.insecure_channel(address) as channel:
            call = channel.unary_unary(METHOD, _identity, _identity)
            for index in range(WARM_UP + runs):
                called = time.time()
                created = _STAMP.unpack(call(_STAMP.pack(0.0), timeout=60))[0]
                closed = _STAMP.unpack(call(_STAMP.pack(idle), timeout=60))[0]
                returned = time.time()
                if index >= WARM_UP:
                    added.append((returned - called) - (closed - created))
    finally:
        for process in (forwarder, end):
            process.kill()
            process.join()
    return {"runs": runs, "idle_ms": round(idle * 1000, 1), **summary_ms(added)}
