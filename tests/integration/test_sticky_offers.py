"""Sticky offers in the scheduler's TaskStore against a real PostgreSQL: a run kept by a worker
(TaskDone.sticky) is offered to that worker at once and to any other only once it has been due
for the sticky timeout; a grant, a TaskDone without sticky or the worker's goodbye ends that."""

from __future__ import annotations

import asyncio

import psycopg

from perdure.scheduler.model import DueReason, Grant, Lease
from perdure.scheduler.store import TaskStore
from tests.integration.test_scheduler_store import (
    PAST_EXPIRY,
    QUEUE,
    SHORT_TTL,
    TTL,
    TYPE,
    _until_waiting_for_a_lock,
    hours,
    pool,
    store,
    task,
)

__all__ = ["pool", "store"]  # the fixtures, shared with the store's other tests

KEPT = 30.0  # the sticky timeout: far longer than any test waits


async def offer(store: TaskStore, session: str, sticky_id: str = "") -> list[Grant]:
    return await store.claim(
        session, QUEUE, [TYPE], [], 10, TTL, sticky_id=sticky_id, sticky_timeout=KEPT
    )


async def claim_ahead(store: TaskStore, session: str, sticky_id: str) -> list[Grant]:
    return await store.claim(
        session, QUEUE, [TYPE], [], 10, TTL, 5.0, sticky_id=sticky_id, sticky_timeout=KEPT
    )


async def kept_by(store: TaskStore, workflow_id: str, sticky_id: str) -> Lease:
    """Run a task once on worker `sticky_id`, which keeps the run (TaskDone.sticky)."""
    await store.enqueue([task(workflow_id)])
    [grant] = await offer(store, f"session-of-{sticky_id}", sticky_id)
    assert await store.release(f"session-of-{sticky_id}", grant.lease, sticky_id=sticky_id)
    return grant.lease


async def test_a_kept_run_is_offered_to_its_worker_at_once_and_to_others_after_the_timeout(
    store: TaskStore,
) -> None:
    await kept_by(store, "kept", "w1")
    await store.enqueue([task("kept")])  # its next task is due now (a signal, say)

    assert await offer(store, "plain") == []  # a worker with no cache
    assert await offer(store, "other", "w2") == []  # another worker's cache
    # Waiting for w1 is not "overdue" to the others: the grant loop sleeps until the timeout.
    assert (await store.next_due([QUEUE], sticky_ids=["w2"], sticky_timeout=KEPT) or 0) > KEPT - 5
    assert (await store.next_due([QUEUE], sticky_ids=["w1"], sticky_timeout=KEPT) or 1) <= 0

    [grant] = await offer(store, "another-session-of-w1", "w1")  # any session of w1
    assert (grant.workflow_id, grant.sticky_id) == ("kept", "w1")


async def test_a_kept_run_due_for_longer_than_the_timeout_goes_to_any_worker(
    store: TaskStore,
) -> None:
    await kept_by(store, "kept", "w1")
    await store.enqueue([task("kept", hours(-1))])  # due for an hour: w1 did not come

    [grant] = await offer(store, "plain")
    assert (grant.workflow_id, grant.sticky_id) == ("kept", "w1")
    # The grant ended the reservation: released without sticky, the run is anyone's at once.
    assert await store.release("plain", grant.lease)
    await store.enqueue([task("kept")])
    assert [g.workflow_id for g in await offer(store, "other", "w2")] == ["kept"]


async def test_a_task_done_without_sticky_ends_the_reservation(store: TaskStore) -> None:
    lease = await kept_by(store, "kept", "w1")
    await store.enqueue([task("kept")])
    [grant] = await offer(store, "session-of-w1", "w1")
    assert grant.fence == lease.fence + 1
    assert await store.release("session-of-w1", grant.lease)  # not sticky this time

    await store.enqueue([task("kept")])
    assert [g.workflow_id for g in await offer(store, "plain")] == ["kept"]


async def test_a_timer_kept_for_a_worker_is_granted_ahead_only_to_it(store: TaskStore) -> None:
    await kept_by(store, "kept", "w1")
    await store.enqueue([task("kept", hours(2 / 3600), reason=DueReason.TIMER)])  # in 2 s
    assert await claim_ahead(store, "other", "w2") == []
    [grant] = await claim_ahead(store, "w1s", "w1")
    assert grant.workflow_id == "kept" and grant.late_by < 0


async def test_a_goodbye_ends_every_reservation_of_its_worker(store: TaskStore) -> None:
    await kept_by(store, "a", "w1")
    await kept_by(store, "b", "w1")
    await kept_by(store, "c", "w2")
    await store.enqueue([task("a"), task("b"), task("c")])

    await store.forget_worker("w1")

    assert sorted(g.workflow_id for g in await offer(store, "plain")) == ["a", "b"]


async def test_ending_a_workers_reservations_locks_them_in_key_order(
    store: TaskStore, database_dsn: str
) -> None:
    """As test_statements_changing_several_tasks_lock_them_in_key_order, for the goodbye's
    statement: it waits for "early" holding nothing, and both transactions go through."""
    await kept_by(store, "late", "w1")
    await kept_by(store, "early", "w1")
    async with await psycopg.AsyncConnection.connect(database_dsn) as other:
        await other.execute("SELECT 1 FROM scheduler.tasks WHERE workflow_id = 'early' FOR UPDATE")
        changing: asyncio.Task[object] = asyncio.create_task(store.forget_worker("w1"))
        await _until_waiting_for_a_lock(database_dsn, changing)
        await other.execute(
            "UPDATE scheduler.tasks SET updated_at = now() WHERE workflow_id = 'late'"
        )
        await other.commit()
    await asyncio.wait_for(changing, timeout=30)


async def test_the_expired_lease_of_a_kept_run_goes_to_any_worker(store: TaskStore) -> None:
    """A lease of a kept run that expires goes to any worker at once, as every expired lease."""
    await kept_by(store, "kept", "w1")
    await store.enqueue([task("kept")])
    [grant] = await store.claim("w1s", QUEUE, [TYPE], [], 10, SHORT_TTL, sticky_id="w1")
    await asyncio.sleep(PAST_EXPIRY)
    [taken] = await offer(store, "plain")
    assert (taken.workflow_id, taken.fence, taken.previous_owner) == (
        "kept",
        grant.fence + 1,
        "w1s",
    )
