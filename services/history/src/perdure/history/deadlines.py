"""Fails runs whose execution timeout has passed, whether or not any worker is alive."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from perdure.history.journal import EXPIRE_BATCH, Journal
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how late past its deadline a run may fail, at most (plus the write)


class DeadlineWatch:
    """Looks for runs past their deadline twice a second and fails them."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Watch in the background."""
        self._task = asyncio.create_task(self._run(), name="deadline-watch")

    async def stop(self) -> None:
        """Stop watching; runs past their deadline fail at the next start (or another replica)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                with untraced():  # the poll runs all the time; the closes are logged
                    while await self._journal.expire_runs() == EXPIRE_BATCH:
                        pass
            except Exception:
                log.exception("failing runs past their execution deadline failed, will retry")
