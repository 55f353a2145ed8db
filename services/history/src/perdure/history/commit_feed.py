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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import grpc
import psycopg

from perdure.common import errors

log = logging.getLogger(__name__)

CHANNEL = "perdure_run"
STATUS_CHANNEL = "perdure_run_status"
RECONNECT_SECONDS = 1.0
SAFETY_RECHECK = 15.0  # seconds a watcher waits without a notification before it re-reads


class Watch:
    """One watcher's wake-up: set by a notification of its run's key."""

    def __init__(self, key: str, feed: CommitFeed, *, status_only: bool = False) -> None:
        self.key = key  # the run's key, which changes when the run is archived
        self.status_only = status_only  # woken by a change of the run's status alone
        self._feed = feed
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()

    async def changed(self, within: float = SAFETY_RECHECK) -> None:
        """Wait until the run changed since the last call (at most `within` seconds). Call it
        after reading: a change during the read wakes it at once."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), max(within, 0))
        self._event.clear()
        if self._feed.closing:
            raise errors.ApiError(
                grpc.StatusCode.UNAVAILABLE,
                "",
                "this history replica is stopping: call again with the last event id or frame "
                "seq you received (another replica answers)",
            )


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
    async def watch(self, key: str, *, status_only: bool = False) -> AsyncIterator[Watch]:
        """Wake-ups of the run `key` while the context lasts (enter it before the first read,
        so no commit falls between the read and the watch): by every commit to the run, or
        with `status_only` by the changes of its status alone."""
        watch = Watch(key, self, status_only=status_only)
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

    def committed(self, key: str, status: bool) -> None:
        """A commit this process made to the run `key` (`status`: it changed the run's status):
        wake its watchers here at once; PostgreSQL's notifications reach the other replicas."""
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
        conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            await conn.execute(f"LISTEN {STATUS_CHANNEL}")
            self.connected.set()
            self._wake_all()  # whatever was committed while nobody listened
            async for notify in conn.notifies():
                self.wake(notify.payload, status=notify.channel == STATUS_CHANNEL)
        finally:
            self.connected.clear()
            self._wake_all()
            await conn.close()
