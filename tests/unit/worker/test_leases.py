"""The worker's lease keeper against a scripted RenewLeases: deadlines on the database clock,
work cancelled when a lease cannot be renewed in time or a renewal leaves it out, grants that
arrive dead not held, and the loop watch naming the step that blocks the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import grpc
import pytest
from google.protobuf import timestamp_pb2

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.worker import _loop_watch
from perdure.worker._leases import LeaseKeeper
from perdure.worker._loop_watch import running
from tests.unit.worker.fake_journal import FakeJournal, make_context

TTL = 0.6
INTERVAL = 0.1


class Unavailable(grpc.RpcError):
    """What a renewal gets while no scheduler answers."""


class ScriptedScheduler:
    """Answers RenewLeases with the database clock `clock()`: renews the leases `renews`
    allows (every one by default), or fails while `down`."""

    def __init__(self, clock: Callable[[], float] = time.time, ttl: float = TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self.down = False
        self.slow = 0  # how many of the next calls take their whole timeout, then fail
        self.renews: Callable[[tpb.LeaseRef], bool] = lambda lease: True
        self.calls = 0
        self.answered = threading.Event()

    def RenewLeases(self, request: tpb.RenewLeasesRequest, timeout: float) -> object:
        self.calls += 1
        if self.down:
            raise Unavailable()
        if self.slow:
            self.slow -= 1
            time.sleep(timeout)
            raise Unavailable()
        now = self.clock()
        response = tpb.RenewLeasesResponse(now=_timestamp(now))
        for lease in request.leases:
            if self.renews(lease):
                response.renewed.add(lease=lease, expire_time=_timestamp(now + self.ttl))
        self.answered.set()
        return response


def _timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


async def _keeper(scheduler: ScriptedScheduler) -> LeaseKeeper:
    keeper = LeaseKeeper(scheduler, asyncio.get_running_loop(), "default")  # type: ignore[arg-type]
    keeper.configure(TTL, INTERVAL)
    keeper.start()
    # The first renewal reads the database clock.
    assert await asyncio.to_thread(scheduler.answered.wait, 5)
    return keeper


def _task(workflow_id: str, expires: float) -> tpb.Task:
    return tpb.Task(workflow_id=workflow_id, fence=1, lease_expire_time=_timestamp(expires))


async def test_leases_renewed_in_time_keep_their_work_running() -> None:
    keeper = await _keeper(ScriptedScheduler())
    work = asyncio.create_task(asyncio.sleep(TTL * 4))
    assert keeper.hold(_task("w", time.time() + TTL), work)
    await asyncio.sleep(TTL * 2)  # well past the first expiry: renewals moved it on
    assert not work.done() and [ref.workflow_id for ref in keeper.refs()] == ["w"]
    keeper.stop()
    work.cancel()


async def test_a_lease_that_cannot_be_renewed_has_its_work_cancelled_before_it_expires(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler = ScriptedScheduler()
    keeper = await _keeper(scheduler)
    work = asyncio.create_task(asyncio.sleep(TTL * 4))
    granted = time.monotonic()
    assert keeper.hold(_task("w", time.time() + TTL), work)
    scheduler.down = True
    with caplog.at_level(logging.WARNING, "perdure.worker"), pytest.raises(asyncio.CancelledError):
        await work
    assert time.monotonic() - granted < TTL  # stopped before the lease could expire
    assert keeper.fenced(work) and keeper.refs() == []
    assert "workflow w (fence 1): stopping its work (it could not be renewed" in caplog.text
    keeper.stop()


async def test_one_renewal_that_times_out_is_retried_before_the_lease_is_lost() -> None:
    # As configured by a welcome: a lease lasts three renewal intervals. One attempt that
    # takes its whole timeout (an interval) used to be followed by the next only an interval
    # later, past the worker's deadline: one slow answer cost every lease.
    ttl, interval = 3.0, 1.0
    scheduler = ScriptedScheduler(ttl=ttl)
    keeper = LeaseKeeper(scheduler, asyncio.get_running_loop(), "default")  # type: ignore[arg-type]
    keeper.configure(ttl, interval)
    keeper.start()
    assert await asyncio.to_thread(scheduler.answered.wait, 5)
    work = asyncio.create_task(asyncio.sleep(ttl * 3))
    scheduler.slow = 1
    assert keeper.hold(_task("w", time.time() + ttl), work)
    calls = scheduler.calls
    await asyncio.sleep(ttl * 1.5)  # past the deadline the slow attempt's lease had
    assert scheduler.slow == 0 and scheduler.calls >= calls + 2
    assert not work.done() and [ref.workflow_id for ref in keeper.refs()] == ["w"]
    keeper.stop()
    work.cancel()


async def test_a_lease_a_renewal_leaves_out_is_fenced_at_once() -> None:
    scheduler = ScriptedScheduler()
    keeper = await _keeper(scheduler)
    work = asyncio.create_task(asyncio.sleep(TTL * 4))
    scheduler.renews = lambda lease: False  # granted again elsewhere, say
    assert keeper.hold(_task("w", time.time() + TTL), work)
    began = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await work
    assert time.monotonic() - began < TTL / 2
    keeper.stop()


async def test_a_grant_delivered_past_its_deadline_is_not_held() -> None:
    keeper = await _keeper(ScriptedScheduler())
    work = asyncio.create_task(asyncio.sleep(1))
    # Its lease ends within the margin: another worker may be granted it before this one
    # could do anything under it.
    assert not keeper.hold(_task("late", time.time() + TTL * 0.2), work)
    assert keeper.refs() == []
    keeper.stop()
    work.cancel()


async def test_the_loop_watch_names_the_step_blocking_the_event_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = _loop_watch.LoopWatch(asyncio.get_running_loop())

    async def careless_step() -> None:
        with running("step fetch (fetch of w)"):
            deadline = time.monotonic() + _loop_watch.LAG_REPORT_SECONDS + 0.3
            while time.monotonic() < deadline:  # blocks the loop; the watch probes meanwhile
                time.sleep(0.05)  # noqa: ASYNC251 (the careless step under test)
                watch.check()

    with caplog.at_level(logging.WARNING, "perdure.worker"):
        watch.check()  # a probe, answered once the loop is free
        await careless_step()
        await asyncio.sleep(0.05)
    assert "blocked for 1." in caplog.text
    assert "by step fetch (fetch of w)" in caplog.text
    assert "the event loop is free again" in caplog.text


async def test_the_loop_watch_names_an_async_step_body_run_in_a_task_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As the SDK runs a step: the body is a task of its own (its time limits cancel it), and
    # the step's name is noted on the task that awaits it.
    watch = _loop_watch.LoopWatch(asyncio.get_running_loop())
    blocking = threading.Event()
    probing = threading.Thread(target=_probe_while, args=(watch, blocking), daemon=True)

    async def careless() -> int:
        blocking.set()
        time.sleep(_loop_watch.LAG_REPORT_SECONDS + 0.3)  # noqa: ASYNC251 (the careless step)
        blocking.clear()
        return 1

    ctx = make_context(FakeJournal(), [])
    with caplog.at_level(logging.WARNING, "perdure.worker"):
        probing.start()
        assert await ctx.step("careless", careless) == 1
        await asyncio.sleep(0.05)
    probing.join(timeout=5)
    assert "by step careless (careless of" in caplog.text, caplog.text


def _probe_while(watch: _loop_watch.LoopWatch, blocking: threading.Event) -> None:
    """Probe the loop as the worker's watch thread does, until the step has blocked it and
    let it go."""
    blocking.wait(timeout=5)
    while blocking.is_set():
        watch.check()
        time.sleep(0.05)


async def test_a_grant_read_against_the_clock_waits_for_the_next_renewal_of_them_all() -> None:
    # Renewing every held lease at each grant cost the scheduler a statement per held lease
    # per grant; a grant with its expiry on a known clock has its true deadline already.
    scheduler = ScriptedScheduler()
    keeper = LeaseKeeper(scheduler, asyncio.get_running_loop(), "default")  # type: ignore[arg-type]
    keeper.configure(TTL * 10, TTL * 3)  # renewals far apart
    keeper.start()
    assert await asyncio.to_thread(scheduler.answered.wait, 5)  # the clock, read at once
    work = asyncio.create_task(asyncio.sleep(TTL * 4))
    calls = scheduler.calls
    assert keeper.hold(_task("w", time.time() + TTL * 10), work)
    await asyncio.sleep(TTL)
    assert scheduler.calls == calls
    keeper.stop()
    work.cancel()


async def test_a_grant_held_before_any_clock_is_renewed_at_once() -> None:
    scheduler = ScriptedScheduler()
    scheduler.down = True  # the welcome's clock reading fails
    keeper = LeaseKeeper(scheduler, asyncio.get_running_loop(), "default")  # type: ignore[arg-type]
    keeper.configure(TTL * 10, TTL * 3)
    keeper.start()
    deadline = time.monotonic() + 5
    while scheduler.calls == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    scheduler.down = False
    work = asyncio.create_task(asyncio.sleep(TTL * 4))
    assert keeper.hold(_task("w", time.time() + TTL * 10), work)  # its deadline is a guess
    assert await asyncio.to_thread(scheduler.answered.wait, TTL)  # well before the interval
    keeper.stop()
    work.cancel()
