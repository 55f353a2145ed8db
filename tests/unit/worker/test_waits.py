"""Waiting in the replay engine: retries, timers, signals and cancellation, in memory."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import (
    RetryPolicy,
    SignalTimeoutError,
    StepFailedError,
    StepTimeoutError,
    WorkflowCancelledError,
    current_step,
)
from perdure.worker._context import LOCAL_WAIT_SECONDS, Suspended
from perdure.worker._payload import to_payload
from tests.unit.worker.fake_journal import NOW, FakeJournal, make_context


def stamp(seconds: float) -> Any:
    event = wf.HistoryEvent()
    event.due_time.FromDatetime(NOW + timedelta(seconds=seconds))
    return event.due_time


def attempt_failed(event_id: int, step_id: str, attempt: int, due_in: float) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_STEP_ATTEMPT_FAILED,
        step_id=step_id,
        step_name=step_id,
        attempt=attempt,
        failure=wf.Failure(type="IOError", message="flaky"),
        due_time=stamp(due_in),
    )


def signal(event_id: int, name: str, payload: Any) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_SIGNAL_RECEIVED,
        name=name,
        payload=to_payload(payload),
    )


def fail(*args: Any) -> None:
    raise OSError("flaky")


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 2.0), (2, 6.0), (3, 18.0), (4, 30.0), (9, 30.0)]
)
def test_retry_delay_follows_the_formula(attempt: int, expected: float) -> None:
    policy = RetryPolicy(initial_interval=2, backoff_coefficient=3, maximum_interval=30)
    assert policy.delay(attempt) == expected


def test_retry_policy_limits_attempts_and_skips_non_retryable_errors() -> None:
    policy = RetryPolicy(maximum_attempts=3, non_retryable_error_types=("LookupError",))
    assert policy.retries(OSError(), 2)
    assert not policy.retries(OSError(), 3)
    assert not policy.retries(KeyError("k"), 1)  # a subclass of LookupError
    assert RetryPolicy(maximum_attempts=0).retries(OSError(), 10_000)


@pytest.mark.parametrize(
    "bad",
    [
        {"initial_interval": -1},
        {"backoff_coefficient": 0.5},
        {"maximum_attempts": -1},
        {"non_retryable_error_types": "ValueError"},
    ],
)
def test_a_bad_retry_policy_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)


async def test_a_failed_attempt_is_journaled_with_its_delay_and_suspends() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [], retry=RetryPolicy(initial_interval=5))
    with pytest.raises(Suspended) as suspended:
        await ctx.step("fetch", fail)
    [request] = journal.steps()
    assert request.failure.type == "OSError"
    assert request.retry_delay.ToTimedelta() == timedelta(seconds=5)
    assert suspended.value.wait.kind == wf.WAIT_KIND_RETRY
    assert suspended.value.wait.until.ToDatetime(tzinfo=NOW.tzinfo) == NOW + timedelta(seconds=5)


async def test_a_retry_not_due_yet_suspends_without_running() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [attempt_failed(2, "fetch", 1, due_in=10)])
    with pytest.raises(Suspended):
        await ctx.step("fetch", fail)
    assert journal.recorded == []


async def test_a_due_retry_runs_the_next_attempt_with_the_last_heartbeat() -> None:
    journal = FakeJournal()
    ctx = make_context(
        journal,
        [attempt_failed(2, "fetch", 1, due_in=-1), attempt_failed(3, "fetch", 2, due_in=-1)],
    )
    seen: list[int] = []

    def fetch() -> str:
        seen.append(current_step().attempt)
        return "ok"

    assert await ctx.step("fetch", fetch) == "ok"
    assert seen == [3]
    assert journal.steps()[0].attempt == 3


async def test_exhausted_attempts_raise_step_failed() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [attempt_failed(2, "fetch", 1, due_in=-1)])
    with pytest.raises(StepFailedError, match="flaky"):
        await ctx.step("fetch", fail, retry=RetryPolicy(maximum_attempts=2))
    [request] = journal.steps()
    assert not request.HasField("retry_delay")
    assert request.attempt == 2


async def test_a_step_over_its_timeout_is_a_failed_attempt() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    async def slow() -> None:
        await asyncio.sleep(10)

    with pytest.raises(StepFailedError) as caught:
        await ctx.step("slow", slow, timeout=0.01, retry=RetryPolicy(maximum_attempts=1))
    assert caught.value.error_type == StepTimeoutError.__name__


async def test_sleep_records_a_timer_and_suspends_until_it_fires() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    with pytest.raises(Suspended) as suspended:
        await ctx.sleep(30)
    [request] = journal.recorded
    assert isinstance(request, jpb.StartTimerRequest)
    assert request.delay.ToTimedelta() == timedelta(seconds=30)
    assert suspended.value.wait.kind == wf.WAIT_KIND_TIMER


async def test_a_fired_timer_replays_without_waiting() -> None:
    journal = FakeJournal()
    timer = wf.HistoryEvent(
        event_id=2,
        event_type=wf.EVENT_TYPE_TIMER_STARTED,
        step_id="$sleep",
        step_name="$sleep",
        position=0,
        due_time=stamp(0),  # due exactly now: fired
    )
    ctx = make_context(journal, [timer])
    await ctx.sleep(30)
    assert journal.recorded == []


async def test_a_timer_due_soon_is_waited_out_here_and_never_early() -> None:
    """A task granted ahead of its timer (or a short sleep) waits in the worker, with the lease,
    until the timer is due by a clock never ahead of the database's: no suspension."""
    journal = FakeJournal()
    before_load = time.monotonic()
    ctx = make_context(journal, [timer_started(0.08)])  # due 80 ms after the load's db time
    await ctx.sleep(600)  # the recorded timer decides, not the argument
    assert time.monotonic() - before_load >= 0.08
    assert journal.recorded == []  # nothing to record: the timer is in the journal already


async def test_a_timer_due_soon_is_waited_out_on_the_clock_read_at_the_end_of_the_load() -> None:
    """The load's `now` decides what is due at load; the wait counts from the clock history
    read after the events (`clock`), which lags the answer's arrival less: a load that took
    200 ms does not make the wait 200 ms late."""
    journal = FakeJournal()
    due = timer_started(0.2)  # due 200 ms after the load's now: not fired at load
    ctx = make_context(journal, [due], clock=NOW + timedelta(seconds=0.2))
    began = time.monotonic()
    await ctx.sleep(600)
    assert time.monotonic() - began < 0.15  # due by the clock already: no wait
    assert journal.recorded == []


async def test_a_timer_beyond_the_local_wait_suspends() -> None:
    ctx = make_context(FakeJournal(), [timer_started(LOCAL_WAIT_SECONDS + 0.05)])
    with pytest.raises(Suspended) as suspended:
        await ctx.sleep(600)
    assert suspended.value.wait.kind == wf.WAIT_KIND_TIMER


async def test_signals_are_consumed_oldest_first_and_drained() -> None:
    journal = FakeJournal()
    events = [signal(2, "steer", "a"), signal(3, "other", "x"), signal(4, "steer", "b")]
    ctx = make_context(journal, events)
    assert await ctx.wait_for_signal("steer") == "a"
    assert await ctx.drain_signals("steer") == ["b"]
    assert await ctx.drain_signals("steer") == []
    consumed = [list(r.event_ids) for r in journal.recorded]
    assert consumed == [[2], [4], []]


async def test_a_wait_without_a_signal_suspends_and_a_past_timeout_raises() -> None:
    ctx = make_context(FakeJournal(), [])
    with pytest.raises(Suspended) as suspended:
        await ctx.wait_for_signal("approval")
    assert suspended.value.wait == wf.Wait(kind=wf.WAIT_KIND_SIGNAL, name="approval")

    ctx = make_context(FakeJournal(), [])
    with pytest.raises(SignalTimeoutError):
        await ctx.wait_for_signal("approval", timeout=0)


async def test_a_requested_cancellation_is_delivered_once_at_the_next_call() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [], cancel_requested=True)
    with pytest.raises(WorkflowCancelledError):
        await ctx.step("work", lambda: 1)
    assert await ctx.step("compensate", lambda: "undone") == "undone"
    kinds = [type(r).__name__ for r in journal.recorded]
    assert kinds == ["RecordCancellationRequest", "RecordStepRequest"]


def timer_started(seconds: float) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=2,
        event_type=wf.EVENT_TYPE_TIMER_STARTED,
        step_id="$sleep",
        step_name="$sleep",
        position=0,
        due_time=stamp(seconds),
    )


async def test_a_cancellation_interrupts_a_sleep_that_has_not_fired() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [timer_started(600)], cancel_requested=True)
    with pytest.raises(WorkflowCancelledError):
        await ctx.sleep(600)
    [delivered] = journal.recorded
    assert isinstance(delivered, jpb.RecordCancellationRequest)
    assert (delivered.step_id, delivered.position) == ("$sleep:cancelled", 1)

    # Replayed after the timer's time has passed, the cancellation is raised at the same place.
    replayed = make_context(
        FakeJournal(),
        [
            timer_started(-1),
            wf.HistoryEvent(
                event_id=3,
                event_type=wf.EVENT_TYPE_CANCELLATION_DELIVERED,
                step_id="$sleep:cancelled",
                step_name="$sleep:cancelled",
                position=1,
            ),
        ],
    )
    with pytest.raises(WorkflowCancelledError):
        await replayed.sleep(600)
