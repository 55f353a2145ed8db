"""Sticky execution: the worker's cache of suspended runs (docs/worker-protocol.md, "Sticky
execution").

Without it, every wake-up of a run replays its code from the first line. With it, a wait that
is not over leaves the code suspended on an awaitable (Pause) while the runner journals the
suspension as always and ends the task with TaskDone.sticky; the run (its code's task, its
context and replay state, the last event seen, its fence) stays here. The run's next task, if
it comes to this worker and nobody else loaded the run meanwhile (LoadJournal's
previous_fence), loads only the events since, feeds them in and resumes the code, which checks
again what it waits for. Anything else is a replay from the start, as without the cache: the
cache is never needed for correctness, and a run dropped from it is closed so that it can never
journal anything.

Bounded by a count and by an estimate of memory (the journal bytes each run has loaded),
least recently used first out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._telemetry import CACHE_LOOKUPS

if TYPE_CHECKING:
    from perdure.worker._context import Suspended, WorkflowContext

log = logging.getLogger("perdure.worker")

DEFAULT_CACHE_SIZE = 500
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
Outcome = tuple[str, Any]  # what the runner makes of the code's end: ("result", Payload), ...


class Pause:
    """Where a run's code waits between two of its tasks: it parks with what it waits for, the
    runner sees that, and later resumes it (or closes it, which cancels it)."""

    def __init__(self) -> None:
        self.parked: asyncio.Future[wf.Wait] = asyncio.get_running_loop().create_future()
        self._resume: asyncio.Future[None] | None = None
        self.spoiled = False  # the code waited at two places at once: it cannot be kept

    async def park(self, waiting: Suspended) -> None:
        """Suspend the code until the runner resumes it."""
        if self.parked.done():
            # Concurrent durable calls: the code unwinds as without the cache, and is dropped.
            self.spoiled = True
            raise waiting
        self._resume = asyncio.get_running_loop().create_future()
        self.parked.set_result(waiting.wait)
        await self._resume

    def resume(self) -> None:
        """Let the parked code go on (it checks again what it waited for)."""
        assert self._resume is not None
        self.parked = asyncio.get_running_loop().create_future()
        self._resume.set_result(None)


async def advance(code: asyncio.Task[Outcome], pause: Pause) -> tuple[Outcome, bool]:
    """Wait until the code ends (its outcome) or parks (("suspend", wait), True: it can be
    kept). The code is cancelled if this is (a drain, the lease fenced)."""
    try:
        waits: set[asyncio.Future[Any]] = {code, pause.parked}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        code.cancel()
        with contextlib.suppress(BaseException):
            await code
        raise
    if code.done():
        return code.result(), False
    return ("suspend", pause.parked.result()), not pause.spoiled


@dataclass
class CachedRun:
    """A suspended run kept between its tasks."""

    workflow_id: str
    code: asyncio.Task[Outcome]  # the workflow function, parked on `pause`
    pause: Pause
    ctx: WorkflowContext
    fence: int  # the lease it was kept under: resumable only if nobody loaded the run since
    last_event_id: int  # the last event of the journal it has seen
    size: int  # bytes of journal it has loaded (the memory estimate)

    def close(self) -> None:
        """Drop the run: its context refuses every call from now on, and its code is
        cancelled where it waits."""
        self.ctx.close()
        self.code.cancel()
        self.code.add_done_callback(_ignore_outcome)


def _ignore_outcome(code: asyncio.Task[Outcome]) -> None:
    """A dropped run's code ends as it may (cancelled, or raising on its next call): nobody
    looks at that."""
    if not code.cancelled():
        code.exception()


class StickyCache:
    """Suspended runs by workflow id, least recently used first out."""

    def __init__(self, max_runs: int, max_bytes: int) -> None:
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, CachedRun] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._runs)

    def take(self, workflow_id: str) -> CachedRun | None:
        """Take a run out of the cache (for its next task), if it is there."""
        run = self._runs.pop(workflow_id, None)
        if run is not None:
            self._bytes -= run.size
        return run

    def keep(self, run: CachedRun) -> bool:
        """Keep a suspended run, most recently used; drop the least recently used ones beyond
        the bounds. False: the run itself was dropped (it alone is over the byte budget)."""
        if run.size > self.max_bytes:
            self._drop(run, "bytes")
            return False
        self._runs[run.workflow_id] = run
        self._bytes += run.size
        while len(self._runs) > self.max_runs or self._bytes > self.max_bytes:
            why = "count" if len(self._runs) > self.max_runs else "bytes"
            _, oldest = self._runs.popitem(last=False)
            self._bytes -= oldest.size
            self._drop(oldest, why)
        return True

    @staticmethod
    def _drop(run: CachedRun, why: str) -> None:
        log.info(
            "workflow %s: dropped from the cache (over its %s bound); its next task replays",
            run.workflow_id,
            why,
        )
        CACHE_LOOKUPS.add(1, {"perdure.cache.outcome": f"evicted_{why}"})
        run.close()

    def clear(self) -> None:
        """Drop every run (the worker is stopping)."""
        while self._runs:
            _, run = self._runs.popitem()
            run.close()
        self._bytes = 0


def cache_from(size: int | None, max_bytes: int | None) -> StickyCache | None:
    """The cache a Worker's arguments (or PERDURE_WORKER_CACHE_SIZE and
    PERDURE_WORKER_CACHE_BYTES) ask for; None when its size is 0 (off)."""
    if size is None:
        size = int(os.environ.get("PERDURE_WORKER_CACHE_SIZE", DEFAULT_CACHE_SIZE))
    if max_bytes is None:
        max_bytes = int(os.environ.get("PERDURE_WORKER_CACHE_BYTES", DEFAULT_CACHE_BYTES))
    if size < 0 or max_bytes < 0:
        raise ValueError("the cache's size and byte budget must be >= 0 (0: no cache)")
    return StickyCache(size, max_bytes) if size and max_bytes else None


def looked_up(workflow_id: str, outcome: str, why: str = "") -> None:
    """Count a task's cache lookup: hit (resumed), stale (kept, but replayed: `why`), miss."""
    CACHE_LOOKUPS.add(1, {"perdure.cache.outcome": outcome})
    if outcome == "hit":
        log.info("workflow %s: resumed from the cache", workflow_id)
    elif outcome == "stale":
        log.info("workflow %s: its cached state is stale (%s); replaying", workflow_id, why)
    else:
        log.debug("workflow %s: not in the cache; replaying", workflow_id)
