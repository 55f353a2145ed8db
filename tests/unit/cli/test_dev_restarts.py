"""`perdure dev` restarts a dying worker for as long as it takes, waiting longer each time it
dies soon after its start, and as briefly as at first once it ran a while."""

from __future__ import annotations

import time

import pytest

from perdure.cli.dev_cmd import HEALTHY_AFTER, RESTART_DELAY, Child


def test_the_restart_delay_doubles_while_the_worker_keeps_dying_then_resets() -> None:
    worker = Child("worker", ["true"], {})
    delays = []
    for _ in range(9):
        worker.started_at = time.monotonic()  # it died at once
        delays.append(worker.exited())
    first, longest = RESTART_DELAY
    assert delays == [min(first * 2**n, longest) for n in range(9)]
    assert delays[-1] == longest
    assert worker.restart_at is not None and worker.restart_at > time.monotonic()
    worker.started_at = time.monotonic() - HEALTHY_AFTER  # it ran a while before dying
    assert worker.exited() == pytest.approx(first)
