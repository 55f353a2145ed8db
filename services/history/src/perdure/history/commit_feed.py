"""The commit feed: pushes "this run changed" to the watchers in this history process, whichever
replica made the commit.

PostgreSQL raises the notifications (migration 0017: triggers on events and on a run's status,
and the statement that stores frames), each naming the run's key, on one channel; a status
change is also named on a channel of its own (migration 0019). Each history process holds one
connection LISTENing on both and wakes the watchers of that key: a watcher of everything a run
commits (a watch, a stream) on the first channel, a watcher of its status alone (a caller
waiting for the result) on the second, which a run's steps do not wake. The process that
commits a worker's step record, a step's frames or a run's close wakes its own watchers at once
(`committed`), without waiting for the notification to come back from PostgreSQL; other commits
(a signal, a timer, a cancel request) reach them by the notification alone. A watcher re-reads
from its own cursor when woken, so a lost or merged notification costs nothing: when the
connection drops, every watcher is woken once it is back, and a long re-check (SAFETY_RECHECK)
is only the net under that.

Frames this process stores are handed to the readers of their stream here with the wake-up
(`Handed`). A commit of frames is announced by a notification naming the run's key, the
stream, its last frame and the process that stored them ("key\nstream\nlast seq\norigin",
migration 0020), which wakes that stream's readers alone, on the other replicas. A reader whose
every wake-up since its last read handed it the frames right after its cursor, up to the last
one announced, has them without reading (`Watch.handed_after`); anything else (a gap, a frame
announced but not handed, any other notification) makes it read. During a rolling upgrade, a
replica older than migration 0020 matches no watcher to these notifications: its readers of a
stream that a newer replica writes wait for the re-check (SAFETY_RECHECK).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc
import psycopg
from psycopg.conninfo import make_conninfo

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, limits
from perdure.common.db import connection_params
from perdure.history.rows import Row

log = logging.getLogger(__name__)

CHANNEL = "perdure_run"
STATUS_CHANNEL = "perdure_run_status"
# This process, in the notifications of the frames it stores (Streams.emit hands them to its
# own readers, or wakes them).
ORIGIN = uuid.uuid4().hex
RECONNECT_SECONDS = 1.0
SAFETY_RECHECK = 15.0  # seconds a watcher waits without a notification before it re-reads


@dataclass(frozen=True)
class Handed:
    """Frames a commit of this process stored on one stream of a run: their size as a page of
    the stream counts it, and how to make them (in seq order), made only for a reader that
    takes them (streams.py)."""

    stream: str
    size: int
    make: Callable[[], Sequence[wf.StreamFrame]]

    @functools.cached_property
    def frames(self) -> Sequence[wf.StreamFrame]:
        return self.make()


class OnCommitted(Protocol):
    """CommitFeed.committed, as the journal's writers call it."""

    def __call__(
        self, key: str, status: bool, handed: Handed | None = None, closed: Row | None = None
    ) -> None: ...


def no_watchers(
    key: str, status: bool, handed: Handed | None = None, closed: Row | None = None
) -> None:
    """An OnCommitted for a journal no watcher follows (tools, tests)."""


def nobody_waits(key: str) -> bool:
    """CommitFeed.awaited for a journal no watcher follows."""
    return False


class Watch:
    """One watcher's wake-up: set by a notification of its run's key."""

    def __init__(
        self, key: str, feed: CommitFeed, *, status_only: bool = False, stream: str | None = None
    ) -> None:
        self.key = key  # the run's key, which changes when the run is archived
        self.status_only = status_only  # woken by a change of the run's status alone
        self.stream = stream  # a reader's: frames stored on it here are handed to it
        self._feed = feed
        self._event = asyncio.Event()
        self._stale = False  # woken by something not handed: read
        self._handed: list[wf.StreamFrame] = []
        self._handed_bytes = 0
        self._announced = 0  # the last frame a notification said was stored on the stream
        self._closed: Row | None = None  # the run as its close here committed it

    def wake(self) -> None:
        self._stale = True
        self._event.set()

    def hand(self, handed: Handed) -> None:
        if self._handed_bytes + handed.size > limits.HISTORY_PAGE_BYTES:
            # More than one answer holds (one large emit, or a reader slower than its
            # stream): it reads pages, and holds no more here.
            self._handed, self._handed_bytes, self._stale = [], 0, True
        else:
            self._handed.extend(handed.frames)
            self._handed_bytes += handed.size
        self._event.set()

    def hand_closed(self, run: Row) -> None:
        self._closed = run

    def closed_run(self, run_id: str) -> Row | None:
        """The run `run_id` as a close made here committed it (its final row), if one did."""
        closed, self._closed = self._closed, None
        return closed if closed is not None and closed["run_id"] == run_id else None

    def announce(self, last_seq: int) -> None:
        self._announced = max(self._announced, last_seq)
        self._event.set()

    async def changed(self, within: float = SAFETY_RECHECK) -> None:
        """Wait until the run changed since the last call (at most `within` seconds). Call it
        after reading: a change during the read wakes it at once."""
        try:
            # A timeout scope, not wait_for: wait_for wraps the wait in a task of its own, and
            # a wake-up then takes three turns of the loop instead of one.
            async with asyncio.timeout(max(within, 0)):
                await self._event.wait()
        except TimeoutError:
            self._stale = True  # the re-check reads
        self._event.clear()
        if self._feed.closing:
            raise errors.ApiError(
                grpc.StatusCode.UNAVAILABLE,
                "",
                "this history replica is stopping: call again with the last event id or frame "
                "seq you received (another replica answers)",
            )

    def handed_after(self, cursor: int) -> list[wf.StreamFrame] | None:
        """The frames after `cursor` handed since the last call, when they are all the reader
        needs (its stream's next frames, none missing, nothing announced beyond them, no other
        wake-up); None: read."""
        stale, handed, announced = self._stale, self._handed, self._announced
        self._stale, self._handed, self._announced, self._handed_bytes = False, [], 0, 0
        fresh = sorted((frame for frame in handed if frame.seq > cursor), key=lambda f: f.seq)
        if stale or [f.seq for f in fresh] != list(range(cursor + 1, cursor + 1 + len(fresh))):
            return None
        if announced > (fresh[-1].seq if fresh else cursor):
            return None  # stored elsewhere, or not handed
        return fresh


class CommitFeed:
    """This process's LISTEN connection and the watchers it wakes, by run key."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._watches: dict[str, set[Watch]] = {}
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()  # set while LISTENing
        self.closing = False  # the server stops: watches end, to be called again elsewhere

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="commit feed")

    def close_watches(self) -> None:
        """End every watch at its next wait (the server stops; its clients call another)."""
        self.closing = True
        self._wake_all()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @contextlib.asynccontextmanager
    async def watch(
        self, key: str, *, status_only: bool = False, stream: str | None = None
    ) -> AsyncIterator[Watch]:
        """Wake-ups of the run `key` while the context lasts (enter it before the first read,
        so no commit falls between the read and the watch): by every commit to the run, or
        with `status_only` by the changes of its status alone; a reader of `stream` is handed
        the frames stored on it here."""
        watch = Watch(key, self, status_only=status_only, stream=stream)
        self._watches.setdefault(key, set()).add(watch)
        try:
            yield watch
        finally:
            self._forget(watch)

    def follow(self, watch: Watch, key: str) -> None:
        """Move a watch to its run's current key (a run archived when its chain went on)."""
        if key != watch.key:
            self._forget(watch)
            watch.key = key
            self._watches.setdefault(key, set()).add(watch)

    def _forget(self, watch: Watch) -> None:
        watches = self._watches.get(watch.key)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._watches[watch.key]

    def wake(self, key: str, *, status: bool = False) -> None:
        """Wake the watchers of the run `key`: of everything it commits (a notification of a
        commit to it), or of its status alone (`status`: of a change of its status)."""
        for watch in self._watches.get(key, ()):
            if watch.status_only == status:
                watch.wake()

    def stored(self, key: str, stream: str, last_seq: int) -> None:
        """Frames up to `last_seq` were stored on the stream of the run `key` (a notification):
        its readers read them unless they were handed them already. Nobody else is woken."""
        for watch in self._watches.get(key, ()):
            if watch.stream == stream:
                watch.announce(last_seq)

    def _notified(self, payload: str) -> None:
        """A notification on CHANNEL: a run's key, or frames stored on one of its streams
        ("key\nstream\nlast seq\norigin"); anything else wakes whoever it names."""
        key, *stored = payload.split("\n")
        if len(stored) != 3 or not stored[1].isdigit():
            self.wake(key)
        elif stored[2] != ORIGIN:  # this process hands its own frames to its readers
            self.stored(key, stored[0], int(stored[1]))

    def awaited(self, key: str) -> bool:
        """Whether a caller here waits for the run `key`'s result (a close hands it the run)."""
        return any(watch.status_only for watch in self._watches.get(key, ()))

    def committed(
        self, key: str, status: bool, handed: Handed | None = None, closed: Row | None = None
    ) -> None:
        """A commit this process made to the run `key` (`status`: it changed the run's status;
        `handed`: it stored only these frames; `closed`: it closed the run, now this row): wake
        its watchers here at once, handing the frames to their stream's readers and the closed
        run to the callers waiting for its result; PostgreSQL's notifications reach the other
        replicas (and the watchers here again)."""
        if handed is not None:
            for watch in self._watches.get(key, ()):
                if watch.stream == handed.stream:
                    watch.hand(handed)
            return
        if closed is not None:
            for watch in self._watches.get(key, ()):
                if watch.status_only:
                    watch.hand_closed(closed)
        self.wake(key)
        if status:
            self.wake(key, status=True)

    def _wake_all(self) -> None:
        for watches in self._watches.values():
            for watch in watches:
                watch.wake()

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except psycopg.Error as error:
                log.warning("commit feed: LISTEN connection lost, reconnecting: %s", error)
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _listen(self) -> None:
        """LISTEN until the connection drops (the loop reconnects)."""
        dsn = make_conninfo(self._dsn, **connection_params(self._dsn, "perdure-history-feed"))
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            await conn.execute(f"LISTEN {STATUS_CHANNEL}")
            self.connected.set()
            self._wake_all()  # whatever was committed while nobody listened
            async for notify in conn.notifies():
                if notify.channel == STATUS_CHANNEL:
                    self.wake(notify.payload, status=True)
                    continue
                self._notified(notify.payload)
        finally:
            self.connected.clear()
            self._wake_all()
            await conn.close()
