"""The cache of suspended runs, in process: a kept run's code resumes on the events fed in as a
replay would go on, refuses what only a replay can take in, and once dropped journals nothing
more; the cache keeps to its bounds, least recently used out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import WorkflowContext, workflow
from perdure.worker._errors import LeaseLostError
from perdure.worker._payload import from_payload, to_payload
from perdure.worker._runner import _started
from perdure.worker._sticky import CachedRun, StickyCache, advance
from tests.unit.worker.fake_journal import NOW, FakeJournal

FIRST, NEXT = 2, 5  # the fences of the lease that kept the run and of its next one


def load(journal: FakeJournal, *events: wf.HistoryEvent, previous: int = 0) -> Any:
    loaded = jpb.LoadJournalResponse(
        workflow=wf.WorkflowInfo(
            workflow_id=journal.workflow_id,
            workflow_type="chat",
            status=wf.WORKFLOW_STATUS_RUNNING,
            fence=journal.fence,
        ),
        events=events,
        previous_fence=previous,
    )
    loaded.now.FromDatetime(NOW)
    return loaded


def signal(event_id: int, payload: Any) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=wf.EVENT_TYPE_SIGNAL_RECEIVED,
        name="message",
        payload=to_payload(payload),
    )


STARTED = wf.HistoryEvent(event_id=1, event_type=wf.EVENT_TYPE_WORKFLOW_STARTED)


@workflow
async def chat(ctx: WorkflowContext) -> list[Any]:
    return [await ctx.wait_for_signal("message") for _ in range(2)]


async def kept_run(journal: FakeJournal, fn: Any = chat) -> CachedRun:
    """The run started under `journal` and parked at its first wait."""
    run = _started(fn, load(journal, STARTED), journal, asyncio.Event(), lambda: 0.0, True)
    (outcome, wait), keepable = await advance(run.code, run.pause)
    assert (outcome, wait.kind, keepable) == ("suspend", wf.WAIT_KIND_SIGNAL, True)
    return run


async def test_a_kept_run_resumes_on_the_new_events_under_the_new_lease() -> None:
    run = await kept_run(FakeJournal(fence=FIRST))
    later = FakeJournal(fence=NEXT)
    assert run.ctx.resume(load(later, signal(2, "hi"), signal(3, "there")), later)
    run.pause.resume()

    (outcome, value), _ = await advance(run.code, run.pause)

    assert (outcome, from_payload(value)) == ("result", ["hi", "there"])
    consumed = [(r.position, r.step_id, r.fence) for r in later.recorded]
    assert consumed == [(0, "$signal:message", NEXT), (1, "$signal:message#2", NEXT)]


async def test_a_cancel_request_fed_in_is_delivered_where_a_replay_would() -> None:
    run = await kept_run(FakeJournal(fence=FIRST))
    later = FakeJournal(fence=NEXT)
    cancel = wf.HistoryEvent(
        event_id=2,
        event_type=wf.EVENT_TYPE_CANCEL_REQUESTED,
        failure=wf.Failure(message="enough"),
    )
    assert run.ctx.resume(load(later, cancel), later)
    run.pause.resume()

    (outcome, failure), _ = await advance(run.code, run.pause)

    assert outcome == "cancelled" and "enough" in failure.message
    [delivered] = later.recorded
    assert isinstance(delivered, jpb.RecordCancellationRequest)
    assert (delivered.position, delivered.step_id) == (0, "$signal:message")


@pytest.mark.parametrize("fence", [FIRST, 3], ids=["own", "another-lease"])
async def test_an_event_only_a_replay_can_take_in_refuses_the_resume(fence: int) -> None:
    run = await kept_run(FakeJournal(fence=FIRST))
    later = FakeJournal(fence=NEXT)
    # A step's outcome at a position: the kept lease's own write, or another lease's.
    step = wf.HistoryEvent(
        event_id=2, event_type=wf.EVENT_TYPE_STEP_COMPLETED, step_id="x", position=0, fence=fence
    )
    assert run.ctx.resume(load(later, step), later) is (fence == FIRST)
    run.close()


async def test_a_dropped_run_journals_nothing_more() -> None:
    journal = FakeJournal(fence=FIRST)
    finally_raised: list[BaseException] = []

    @workflow
    async def tidy(ctx: WorkflowContext) -> None:
        try:
            await ctx.wait_for_signal("message")
        finally:
            try:
                await ctx.set_state("tidied", True)  # must not reach the journal
            except BaseException as error:
                finally_raised.append(error)
                raise

    run = await kept_run(journal, tidy)
    run.close()
    await asyncio.wait({run.code})

    assert journal.recorded == []
    assert [type(error) for error in finally_raised] == [LeaseLostError]


async def test_the_cache_drops_the_least_recently_used_beyond_its_bounds() -> None:
    runs = [await kept_run(FakeJournal(f"wf-{n}", FIRST)) for n in range(4)]
    for run in runs:
        run.size = 100
    runs[3].size = 300
    cache = StickyCache(max_runs=2, max_bytes=250)
    assert cache.keep(runs[0]) and cache.keep(runs[1])
    assert cache.take("wf-0") is runs[0]
    assert cache.keep(runs[0])  # used again: now the most recent
    assert cache.keep(runs[2])  # over the count: wf-1 goes, closed
    await asyncio.wait({runs[1].code})
    assert runs[1].code.cancelled()
    assert (cache.take("wf-1"), len(cache)) == (None, 2)

    assert not cache.keep(runs[3])  # over the byte budget alone: dropped at once
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0
    await asyncio.wait({run.code for run in runs})
    assert all(run.code.cancelled() for run in runs)
