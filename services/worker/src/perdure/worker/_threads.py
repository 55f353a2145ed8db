"""Threads for sync step bodies: a body runs on a thread an earlier body left idle, or on a new
one when none is idle.

Starting a thread makes the event loop wait until the thread runs; in a busy worker that wait
was a fifth of the process's time. Handing a body to an idle thread costs a queue put.

A body past its time limit is abandoned, not stopped (a thread cannot be): it keeps its thread
until it returns, and later bodies take other threads, so an abandoned body holds no place
that anything else waits for. A thread left idle for IDLE_SECONDS ends.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

IDLE_SECONDS = 60.0
IDLE_NAME = "perdure-step-idle"

Job = Callable[[], None]


class BodyThreads:
    """Daemon threads that run jobs, reused while idle."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self._idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Job]] = []  # the inboxes of idle threads, LIFO
        self.started = 0  # threads started so far

    def run(self, job: Job, name: str) -> None:
        """Run `job` (which must not raise) on an idle thread, or on a new one; the thread
        bears `name` while it runs the job."""

        def named() -> None:
            threading.current_thread().name = name
            job()

        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self.started += 1
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put(named)

    @property
    def idle(self) -> int:
        """How many threads wait for a job."""
        with self._lock:
            return len(self._idle)

    def _serve(self, inbox: queue.SimpleQueue[Job]) -> None:
        while True:
            try:
                job = inbox.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # still idle: nobody can hand it a job now
                        self._idle.remove(inbox)
                        return
                continue  # taken from the idle list just now: its job is on the way
            job()
            threading.current_thread().name = IDLE_NAME
            with self._lock:
                self._idle.append(inbox)
