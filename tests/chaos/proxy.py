"""A TCP proxy the harness controls: every connection between two processes of the cluster goes
through one of its links, and a link can pass, delay, hold one or both directions (a partition:
bytes wait, as TCP's would, until it heals), reset, or cut connections when a reply comes back
(the request was served, its answer lost). Loopback only; it runs on its own event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

UP, DOWN = "up", "down"  # up: from the connecting side to the listening one; down: the reverse
CHUNK = 65536


@dataclass(frozen=True)
class Fault:
    """What a link does to its traffic."""

    held: frozenset[str] = frozenset()  # directions whose bytes wait (a partition)
    delay: float = 0.0  # seconds added before each chunk
    reset: bool = False  # every connection is cut with a TCP reset, new ones too
    lose_replies: float = 0.0  # chance that a reply cuts the connection instead of arriving

    def describe(self) -> str:
        """A short name for logs."""
        parts = [f"hold-{d}" for d in sorted(self.held)]
        parts += ["reset"] * self.reset
        parts += [f"delay-{self.delay:g}s"] * bool(self.delay)
        parts += [f"lose-replies-{self.lose_replies:g}"] * bool(self.lose_replies)
        return "+".join(parts) or "pass"


PASS = Fault()
PARTITION = Fault(held=frozenset({UP, DOWN}))
HOLD_REQUESTS = Fault(held=frozenset({UP}))
HOLD_REPLIES = Fault(held=frozenset({DOWN}))
RESET = Fault(reset=True)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), not a graceful FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class Link:
    """One listening port in front of one upstream, between a source and a target process."""

    source: str
    target: str
    upstream: tuple[str, int] | str  # host and port, or a Unix socket path
    port: int = 0
    fault: Fault = PASS
    rng: random.Random = field(default_factory=random.Random)
    connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = field(default_factory=set)
    flowing: dict[str, asyncio.Event] = field(default_factory=dict)
    lost_replies: int = 0

    async def serve(self) -> asyncio.Server:
        """Listen on a free loopback port."""
        self.flowing = {UP: asyncio.Event(), DOWN: asyncio.Event()}
        self.apply(self.fault)
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(server.sockets[0].getsockname()[1])
        return server

    def apply(self, fault: Fault) -> None:
        """Switch to `fault` (on the proxy's loop)."""
        self.fault = fault
        for direction, event in self.flowing.items():
            if direction in fault.held:
                event.clear()
            else:
                event.set()
        if fault.reset:
            for pair in list(self.connections):
                self._cut(pair)

    def _cut(self, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        self.connections.discard(pair)
        for writer in pair:
            _abort(writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.fault.reset:
            _abort(writer)
            return
        try:
            if isinstance(self.upstream, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort(writer)  # the target is down: the caller sees its connection refused
            return
        pair = (writer, up_writer)
        self.connections.add(pair)
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer, UP, pair)),
            asyncio.create_task(self._pump(up_reader, writer, DOWN, pair)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        self.connections.discard(pair)
        for side in pair:
            side.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        direction: str,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            while chunk := await reader.read(CHUNK):
                await self.flowing[direction].wait()
                if self.fault.delay:
                    await asyncio.sleep(self.fault.delay)
                if direction == DOWN and self.rng.random() < self.fault.lose_replies:
                    self.lost_replies += 1
                    self._cut(pair)
                    return
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            pass


class Proxy:
    """Links on a background event loop, switched by the harness from its own thread."""

    def __init__(self, seed: int = 0) -> None:
        self.links: list[Link] = []
        self._seed = seed
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=30)

    def link(self, source: str, target: str, upstream: tuple[str, int] | str) -> Link:
        """A new link from `source` to `target`; connect to 127.0.0.1:<link.port>."""
        link = Link(
            source,
            target,
            upstream,
            rng=random.Random(f"{self._seed}:{source}->{target}"),
        )

        async def serve() -> None:
            self._servers.append(await link.serve())

        self._run(serve())
        self.links.append(link)
        return link

    def select(self, matches: Callable[[Link], bool]) -> list[Link]:
        """The links `matches` picks."""
        return [link for link in self.links if matches(link)]

    def apply(self, links: list[Link], fault: Fault) -> None:
        """Switch `links` to `fault`."""

        async def switch() -> None:
            for link in links:
                link.apply(fault)

        self._run(switch())

    def heal(self) -> None:
        """Every link back to pass-through."""
        self.apply(self.links, PASS)

    def close(self) -> None:
        """Stop listening and end the loop."""

        async def stop() -> None:
            for server in self._servers:
                server.close()
            for link in self.links:
                for pair in list(link.connections):
                    link._cut(pair)

        self._run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
