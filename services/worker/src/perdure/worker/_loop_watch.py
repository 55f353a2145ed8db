"""Which user code holds the event loop, and a watch that names it when the loop stalls.

An async step that blocks (a `time.sleep`, a blocking client, a long computation) stalls every
run on the worker. Lease renewal does not depend on the loop (see _leases), so the run does not
bounce between workers; but the author must hear of it, by name. Each task running user code
notes what it runs here; a thread probes the loop and, when a probe goes unanswered for
LAG_REPORT_SECONDS, logs the code the loop is stuck in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from perdure.worker._telemetry import LOOP_BLOCKED

log = logging.getLogger("perdure.worker")

# A loop that answers no probe for this long is reported (a step's normal work between two
# awaits takes far less).
LAG_REPORT_SECONDS = 1.0

# asyncio task -> what user code it runs now. Written on the loop, read by the watch's thread
# (a dict lookup is atomic).
_running: dict[asyncio.Task[Any], str] = {}


@contextlib.contextmanager
def running(description: str) -> Iterator[None]:
    """Note that the current task runs the user code `description` ("step x of run y")."""
    task = asyncio.current_task()
    if task is None:
        yield
        return
    previous = _running.get(task)
    _running[task] = description
    try:
        yield
    finally:
        if previous is None:
            _running.pop(task, None)
        else:
            _running[task] = previous


def runs_for_caller(task: asyncio.Task[Any]) -> None:
    """Note that `task`, started by the current task to run its user code (a step's async
    body, awaited in a task of its own so that time limits can cancel it), runs what the
    current task runs, until it is done."""
    description = running_in(asyncio.current_task())
    if description is not None and not task.done():
        _running[task] = description
        task.add_done_callback(_forget)


def _forget(task: asyncio.Task[Any]) -> None:
    _running.pop(task, None)


def relabel(task: asyncio.Task[Any], description: str) -> None:
    """Note that `task`, between two steps, now runs the user code `description` (a kept run's
    code, resumed under another lease)."""
    if task in _running:
        _running[task] = description


def running_in(task: asyncio.Task[Any] | None) -> str | None:
    """The user code `task` runs now, if any (callable from any thread)."""
    return None if task is None else _running.get(task)


def blocking(loop: asyncio.AbstractEventLoop) -> str:
    """What the loop runs now, called from another thread: the user code its current task
    runs, or "code outside any step"."""
    return running_in(asyncio.current_task(loop)) or "code outside any step"


class LoopWatch:
    """Probes the loop from the caller's thread: call `check()` every few hundred ms."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._probe_sent: float | None = None  # monotonic; None: the last probe was answered
        self._reported: str | None = None  # what the stall under way was reported as

    def check(self) -> None:
        """Report a stall once when it passes LAG_REPORT_SECONDS, and again when it ends."""
        sent = self._probe_sent
        now = time.monotonic()
        if sent is None:
            self._probe_sent = now
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is done
                self._loop.call_soon_threadsafe(self._answered, now)
            return
        if self._reported is None and now - sent >= LAG_REPORT_SECONDS:
            self._reported = blocking(self._loop)
            LOOP_BLOCKED.add(1)
            log.warning(
                "the event loop has been blocked for %.1fs by %s: an async step must not block "
                "(make it a sync step, or call the blocking code with asyncio.to_thread); "
                "every other run on this worker waits meanwhile",
                now - sent,
                self._reported,
            )

    def _answered(self, sent: float) -> None:
        if self._reported is not None:
            log.warning(
                "the event loop is free again after %.1fs blocked by %s",
                time.monotonic() - sent,
                self._reported,
            )
        self._reported = None
        self._probe_sent = None
