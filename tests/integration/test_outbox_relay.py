"""The outbox relay on a real PostgreSQL, with a scheduler that holds the batches it is told to
(a fault point, not a sleep): a request committed while a batch is on its way goes at once in
a batch of its own; a workflow's requests still reach the scheduler in order; a batch that
fails or is stopped leaves its rows for the next round.

The relay's poll is set to an hour here: whatever reaches the scheduler was sent because of a
wake-up, never because a poll came round."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from perdure.common.payload import json_payload
from perdure.history import outbox
from perdure.history.outbox import OutboxRelay
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as sched
from tests.integration.journal_db import Db, db, journal_dsn, run_id

__all__ = ["db", "journal_dsn"]  # the fixtures

TIMEOUT = 30.0  # seconds: generous, each step takes milliseconds


class HoldingScheduler:
    """EnqueueTasks as the relay sees it: records every batch's workflow ids as it arrives,
    holds a batch naming a workflow in `held` until that workflow is released, and fails the
    first batch naming a workflow in `failing`."""

    def __init__(self) -> None:
        self.arrived: list[list[str]] = []
        self.answered: list[list[str]] = []
        self.held: dict[str, asyncio.Event] = {}
        self.failing: set[str] = set()
        self._changed = asyncio.Condition()

    async def EnqueueTasks(
        self, request: sched.EnqueueTasksRequest, **options: object
    ) -> sched.EnqueueTasksResponse:
        ids = [task.workflow_id for task in request.tasks]
        await self._note(self.arrived, ids)
        if failing := self.failing & set(ids):
            self.failing -= failing
            raise OSError("the scheduler is unreachable")
        for workflow_id in ids:
            if workflow_id in self.held:
                await self.held[workflow_id].wait()
        await self._note(self.answered, ids)
        return sched.EnqueueTasksResponse()

    async def _note(self, into: list[list[str]], ids: list[str]) -> None:
        async with self._changed:
            into.append(ids)
            self._changed.notify_all()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait (at most TIMEOUT) until `condition` holds."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), TIMEOUT)

    def batches_with(self, workflow_id: str, of: list[list[str]]) -> int:
        return sum(workflow_id in ids for ids in of)


@pytest.fixture
async def relay(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[OutboxRelay, HoldingScheduler]]:
    monkeypatch.setattr(outbox, "POLL_SECONDS", 3600.0)
    scheduler = HoldingScheduler()
    relay = OutboxRelay(db.pool, scheduler)  # type: ignore[arg-type]
    relay.start()
    try:
        yield relay, scheduler
    finally:
        for gate in scheduler.held.values():
            gate.set()
        await relay.stop()


async def started(db: Db) -> str:
    """A new run: one outbox row (its first task), committed."""
    workflow_id = run_id()
    await db.journal.start(workflow_id, "flow", "q", json_payload('"in"'))
    return workflow_id


async def queued(db: Db, workflow_id: str) -> int:
    """How many of the workflow's rows the outbox holds."""
    async with db.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM history.outbox WHERE workflow_id = %s", [workflow_id]
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def until_relayed(db: Db, workflow_id: str) -> None:
    """Wait (at most TIMEOUT) until the batch that sent the workflow's rows has committed."""
    async with asyncio.timeout(TIMEOUT):
        # The commit is the database's alone to tell: looked at again and again.
        while await queued(db, workflow_id):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def held(db: Db, relayer: OutboxRelay, scheduler: HoldingScheduler) -> str:
    """A new run whose row the relay sent in a batch the scheduler now holds."""
    workflow_id = await started(db)
    scheduler.held[workflow_id] = asyncio.Event()
    relayer.notify()
    await scheduler.until(lambda: scheduler.batches_with(workflow_id, scheduler.arrived) == 1)
    return workflow_id


async def test_a_request_committed_while_a_batch_is_on_its_way_is_not_kept_waiting(
    db: Db, relay: tuple[OutboxRelay, HoldingScheduler]
) -> None:
    relayer, scheduler = relay
    slow = await held(db, relayer, scheduler)

    # The first batch is held at the scheduler: the next request goes in a batch of its own.
    quick = await started(db)
    relayer.notify()
    await scheduler.until(lambda: scheduler.batches_with(quick, scheduler.answered) == 1)
    assert scheduler.batches_with(slow, scheduler.answered) == 0, "the first batch was not held"
    # The scheduler answered; the quick batch's delete commits just after it.
    await until_relayed(db, quick)
    assert await queued(db, slow) == 1

    scheduler.held[slow].set()
    await until_relayed(db, slow)


async def test_a_workflows_requests_reach_the_scheduler_in_order_across_batches(
    db: Db, relay: tuple[OutboxRelay, HoldingScheduler]
) -> None:
    relayer, scheduler = relay
    workflow_id = await held(db, relayer, scheduler)

    # A second request of the same workflow while its first is held: no batch may send it
    # before the first is done (the scheduler would apply them out of order).
    assert await db.journal.signal(workflow_id, "go", json_payload("1"), None)
    other = await started(db)  # and an extra batch does run meanwhile, for another workflow
    relayer.notify()
    await scheduler.until(lambda: scheduler.batches_with(other, scheduler.answered) == 1)
    assert scheduler.batches_with(workflow_id, scheduler.arrived) == 1
    assert await queued(db, workflow_id) == 2

    # Once the first is done, the loop looks again at once (its poll is an hour away).
    scheduler.held.pop(workflow_id).set()
    await until_relayed(db, workflow_id)
    assert scheduler.batches_with(workflow_id, scheduler.answered) == 2
    first, second = (i for i, ids in enumerate(scheduler.answered) if workflow_id in ids)
    assert first < second


async def test_a_failed_extra_batch_leaves_its_rows_for_the_next_round(
    db: Db, relay: tuple[OutboxRelay, HoldingScheduler]
) -> None:
    relayer, scheduler = relay
    slow = await held(db, relayer, scheduler)

    unlucky = await started(db)
    scheduler.failing.add(unlucky)
    relayer.notify()  # an extra batch, which fails
    await scheduler.until(lambda: scheduler.batches_with(unlucky, scheduler.arrived) == 1)
    await asyncio.gather(*relayer._extras)
    assert await queued(db, unlucky) == 1, "a failed batch's row was lost"

    # After a failure no extra batch starts (the scheduler may be down): the loop's turn.
    later = await started(db)
    relayer.notify()
    assert not relayer._extras, "an extra batch started after one failed"
    scheduler.held[slow].set()
    await until_relayed(db, later)
    await until_relayed(db, unlucky)
    assert scheduler.batches_with(unlucky, scheduler.answered) == 1


async def test_stopping_with_batches_under_way_keeps_their_rows(
    db: Db, relay: tuple[OutboxRelay, HoldingScheduler]
) -> None:
    relayer, scheduler = relay
    first = await held(db, relayer, scheduler)  # the loop's batch
    second = await held(db, relayer, scheduler)  # an extra batch

    await asyncio.wait_for(relayer.stop(), TIMEOUT)
    assert scheduler.answered == []
    assert await queued(db, first) == 1 and await queued(db, second) == 1
