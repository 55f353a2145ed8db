"""What a remote step's attempt used, as its TaskDone reports it (worker-protocol.md §27) and
its journaled outcome records it (§32)."""

from __future__ import annotations

import threading

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.worker._flow import Usage


class UsageReport:
    """One step task's usage: zero until its handler starts (nothing ran), then the handler's
    last report, or none (the scheduler counts the whole estimate). Reports after the attempt
    ended (an abandoned sync body's) are ignored: the outcome is recorded already."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a sync body reports from its own thread
        self._ran = False
        self._ended = False
        self._usage: Usage | None = None
        self._model = ""

    def start(self) -> None:
        """The handler starts: from now on the attempt counts as having run."""
        with self._lock:
            self._ran = True

    def report(self, usage: Usage, model: str = "") -> None:
        """The handler's report (and the model that answered, for a model call); a later one
        replaces it."""
        with self._lock:
            if not self._ended:
                self._usage, self._model = usage, model

    def end(self) -> None:
        """The attempt is over: later reports change nothing."""
        with self._lock:
            self._ended = True

    def for_task_done(self) -> fpb.Usage | None:
        """TaskDone.usage: zero when nothing ran, the report if one came, else unset (None)."""
        with self._lock:
            if not self._ran:
                return fpb.Usage()
            return self._usage.to_message() if self._usage is not None else None

    def for_journal(self) -> fpb.StepUsage | None:
        """RecordStepRequest.usage: the report with its model; None when none came."""
        with self._lock:
            if self._usage is None:
                return None
            return fpb.StepUsage(usage=self._usage.to_message(), model=self._model)
