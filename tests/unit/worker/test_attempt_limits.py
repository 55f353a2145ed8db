"""Attempt counting and time limits in the replay engine, in memory: starts journaled before
the body, lost attempts failed as WorkerLostError, heartbeat timeouts, sync bodies in threads of
their own."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import (
    RetryPolicy,
    StepFailedError,
    StepHeartbeatTimeoutError,
    StepTimeoutError,
    current_step,
    heartbeat,
)
from perdure.worker._context import Suspended
from tests.unit.worker.fake_journal import FakeJournal, make_context
from tests.unit.worker.test_waits import attempt_failed


def attempt_started(event_id: int, step_id: str, attempt: int) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_STEP_ATTEMPT_STARTED,
        step_id=step_id,
        step_name=step_id,
        attempt=attempt,
    )


def never(*args: Any) -> None:
    raise AssertionError("a lost attempt is not run again")


async def test_an_attempt_is_journaled_as_started_before_its_body_runs() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    seen: list[int] = []

    def charge() -> int:
        seen.append(len(journal.starts))
        return 5

    await ctx.now()  # the SDK's own calls journal no start: they cannot crash a worker
    assert await ctx.step("charge", charge) == 5
    assert seen == [1]
    [start] = journal.starts
    assert (start.step_id, start.position, start.attempt) == ("charge", 1, 1)
    assert start.attempt_started and start.WhichOneof("outcome") is None
    assert [r.step_id for r in journal.steps()] == ["$now", "charge"]


async def test_a_lost_attempt_is_a_failed_attempt_under_the_retry_policy() -> None:
    journal = FakeJournal()
    events = [
        attempt_started(2, "pay", 1),
        attempt_failed(3, "pay", 1, due_in=-1),
        attempt_started(4, "pay", 2),
    ]
    ctx = make_context(journal, events)
    with pytest.raises(Suspended) as suspended:
        await ctx.step("pay", never, retry=RetryPolicy(initial_interval=1, maximum_attempts=3))
    [request] = journal.steps()
    assert request.attempt == 2
    assert request.failure.type == "WorkerLostError"
    assert "attempt 2 of step 'pay' never reported: the worker running it was lost" in (
        request.failure.message
    )
    assert request.retry_delay.ToTimedelta().total_seconds() == 2.0  # the policy's backoff
    assert suspended.value.wait.kind == wf.WAIT_KIND_RETRY
    assert journal.starts == []


async def test_a_lost_last_attempt_raises_in_the_workflow_code() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [attempt_started(2, "pay", 1)])
    with pytest.raises(StepFailedError, match="WorkerLostError"):
        await ctx.step("pay", never, retry=RetryPolicy(maximum_attempts=1))
    [request] = journal.steps()
    assert not request.HasField("retry_delay") and request.attempt == 1


async def test_the_attempt_after_a_recorded_loss_runs_with_the_next_number() -> None:
    journal = FakeJournal()
    events = [attempt_started(2, "pay", 1), attempt_failed(3, "pay", 1, due_in=-1)]
    ctx = make_context(journal, events)
    assert await ctx.step("pay", lambda: current_step().attempt) == 2
    assert [s.attempt for s in journal.starts] == [2]


async def test_a_step_that_stops_heartbeating_fails_and_one_that_beats_goes_on() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    def steady() -> str:
        for _ in range(6):
            heartbeat()
            time.sleep(0.05)
        return "done"

    assert await ctx.step("steady", steady, heartbeat_timeout=0.2) == "done"
    cancelled = asyncio.Event()

    async def silent() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(Suspended):
        await ctx.step("silent", silent, heartbeat_timeout=0.1)
    failure = journal.steps()[-1].failure
    assert failure.type == StepHeartbeatTimeoutError.__name__
    assert "0.1s without calling heartbeat()" in failure.message
    await asyncio.wait_for(cancelled.wait(), 1)  # an async body is cancelled
    with pytest.raises(ValueError, match="heartbeat_timeout must be a positive"):
        await ctx.step("bad", steady, heartbeat_timeout=0)


async def test_abandoned_sync_bodies_hold_no_slot_a_later_attempt_needs() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    release = threading.Event()
    one_try = RetryPolicy(maximum_attempts=1)
    try:
        for index in range(12):  # twice asyncio's default pool on a small machine
            with pytest.raises(StepFailedError, match="StepTimeoutError"):
                await ctx.step(f"hang-{index}", release.wait, timeout=0.05, retry=one_try)
        began = time.monotonic()
        # Its time limit starts when it starts: at once, in a thread of its own.
        assert await ctx.step("after", lambda: "ran", timeout=0.5) == "ran"
        assert time.monotonic() - began < 0.5
    finally:
        release.set()
    assert StepTimeoutError.__name__ == journal.steps()[0].failure.type
