"""A service's background loop: one round of work at a steady interval (or sooner when woken),
started with the server and stopped with it, a failed round logged and tried again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from perdure.common.aio import wait_event

log = logging.getLogger(__name__)


class BackgroundLoop:
    """Runs `work` every `interval` seconds in a background task.

    With `wake`, a round also starts as soon as the event is set (and clears it). An error of
    a type in `transient` (a peer unreachable for a while) is logged as a warning, any other as
    an exception; either way the next round comes at the next interval.
    """

    def __init__(
        self,
        name: str,
        work: Callable[[], Awaitable[object]],
        interval: float,
        *,
        wake: asyncio.Event | None = None,
        transient: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.name = name
        self._work = work
        self._interval = interval
        self._wake = wake
        self._transient = transient
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run in the background."""
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Stop (a round under way is cancelled); a loop never started stops at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            if self._wake is None:
                await asyncio.sleep(self._interval)
            else:
                await wait_event(self._wake, self._interval)
                self._wake.clear()
            await self.run_round()

    async def run_round(self, work: Callable[[], Awaitable[object]] | None = None) -> None:
        """One round of `work` (the loop's own by default), a failure logged, not raised: the
        next round tries again."""
        try:
            await (work or self._work)()
        except self._transient as error:
            log.warning("%s failed, will retry: %s", self.name, error)
        except Exception:
            log.exception("%s failed, will retry", self.name)
