"""The flow claim against a real PostgreSQL: limits, rates, budgets, fairness and priority
weighed at grant time, by claims racing as scheduler replicas do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.migrate import apply_migrations
from perdure.scheduler.flow.claim import FlowClaimed
from perdure.scheduler.flow.model import FAIL, KeyLimit, RunBudget, TaskFlow
from perdure.scheduler.grants import ClaimFor
from perdure.scheduler.model import DueTask, Grant
from perdure.scheduler.store import TaskStore

QUEUE = "flow-queue"
STEP_TYPE = "model"
TTL = 30.0


@pytest.fixture
async def pool(database_dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    async with await psycopg.AsyncConnection.connect(database_dsn, autocommit=True) as conn:
        await apply_migrations(conn, "scheduler", "perdure.scheduler")
    pool = await open_pool(database_dsn, max_size=8)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def store(pool: AsyncConnectionPool) -> TaskStore:
    return TaskStore(pool)


def step(
    workflow_id: str,
    keys: tuple[str, ...] = (),
    estimate: int | None = None,
    cost: int = 0,
    fairness_key: str = "",
    priority: int = 3,
    on_budget_exceeded: str = "wait",
    budget_keys: tuple[str, ...] = (),
) -> DueTask:
    flow = TaskFlow(
        namespace="default",
        keys=keys,
        budget_keys=budget_keys or keys,
        priority=priority,
        fairness_key=fairness_key,
        estimate_units=estimate,
        estimate_cost=cost,
        on_budget_exceeded=on_budget_exceeded,
    )
    return DueTask(workflow_id, "call", STEP_TYPE, QUEUE, flow=flow)


def run(workflow_id: str, fairness_key: str = "", priority: int = 3, **more: object) -> DueTask:
    flow = TaskFlow(namespace="default", fairness_key=fairness_key, priority=priority)
    return DueTask(workflow_id, "", "agent", QUEUE, flow=flow, **more)  # type: ignore[arg-type]


def claim(session: str, limit: int = 100) -> ClaimFor:
    return ClaimFor(session, QUEUE, ["agent"], [STEP_TYPE], limit, TTL)


async def granted(store: TaskStore, session: str, limit: int = 100) -> FlowClaimed:
    return await store.claim_flow(claim(session, limit))


async def done(store: TaskStore, session: str, grant: Grant, units: int | None = None) -> None:
    if units is not None or grant.step_id:
        await store.settle(grant.lease, units, None if units is None else 0)
    assert await store.release(session, grant.lease)


async def test_a_key_limit_holds_under_claims_racing_on_four_replicas(store: TaskStore) -> None:
    await store.set_limit("default", KeyLimit("provider:openai", max_steps=3))
    total = 120
    await store.enqueue([step(f"wf-{i}", keys=("provider:openai",)) for i in range(total)])
    held: dict[str, list[Grant]] = {session: [] for session in "abcd"}
    finished = 0
    while finished < total:
        # Every "replica" claims at once, each as much as it can take.
        claims = await asyncio.gather(*(granted(store, session) for session in held))
        for session, claimed in zip(held, claims, strict=True):
            held[session] += claimed.grants
        in_flight = sum(len(grants) for grants in held.values())
        assert 0 < in_flight <= 3, held
        for session, grants in held.items():  # one finishes on each side
            if grants:
                await done(store, session, grants.pop(0), units=0)
                finished += 1
    [listed] = await store.limits("default")
    assert (listed.max_steps, listed.steps_in_flight) == (3, 0)


async def test_a_limited_task_waits_and_an_unlimited_one_beside_it_does_not(
    store: TaskStore,
) -> None:
    await store.set_limit("default", KeyLimit("tenant:big", max_steps=1))
    await store.enqueue([step("big-1", keys=("tenant:big",)), step("big-2", keys=("tenant:big",))])
    await store.enqueue([step("free-1"), DueTask("plain-1", "", "agent", QUEUE)])
    claimed = await granted(store, "a")
    ids = sorted(g.workflow_id for g in claimed.grants)
    assert ids in (["big-1", "free-1", "plain-1"], ["big-2", "free-1", "plain-1"])


async def test_the_estimate_is_reserved_and_settled_once_and_never_overspent(
    store: TaskStore,
) -> None:
    await store.set_budget("default", "namespace", "", 100, None, "none")
    await store.enqueue([step(f"wf-{i}", estimate=30) for i in range(5)])
    first = await granted(store, "a")
    assert len(first.grants) == 3  # 90 reserved; a fourth would make 120
    [budget] = await store.budgets("default", ["namespace"])
    assert (budget.reserved_units, budget.spent_units) == (90, 0)
    one = first.grants[0]
    await store.settle(one.lease, 10, 0)
    await store.settle(one.lease, 25, 0)  # a duplicated report counts once
    await store.release("a", one.lease)
    [budget] = await store.budgets("default", ["namespace"])
    assert (budget.reserved_units, budget.spent_units) == (60, 10)
    second = await granted(store, "a")
    assert len(second.grants) == 1  # 60 + 10 + 30 = 100: fits exactly
    assert not (await granted(store, "a")).grants
    [budget] = await store.budgets("default", ["namespace"])
    assert budget.reserved_units + budget.spent_units <= 100


async def test_a_run_that_chose_to_fail_is_granted_its_step_only_to_fail(
    store: TaskStore,
) -> None:
    await store.set_budget("default", "key", "team:research", None, 50, "month")
    task = step(
        "wf-1", estimate=1, cost=80, budget_keys=("team:research",), on_budget_exceeded=FAIL
    )
    await store.enqueue([task])
    [grant] = (await granted(store, "a")).grants
    assert "budget of key 'team:research' has 50 of 50 cost micros left" in grant.budget_exceeded
    [budget] = await store.budgets("default", ["key"])
    assert (budget.reserved_cost, budget.refusals) == (0, 1)


async def test_a_lease_that_ends_without_a_report_is_settled_at_its_estimate(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.set_budget("default", "namespace", "", 1000, None, "day")
    await store.enqueue([step("wf-1", estimate=40)])
    [grant] = (await granted(store, "a")).grants
    await store.settle_ended()  # the lease is live: nothing to settle
    [budget] = await store.budgets("default", ["namespace"])
    assert (budget.reserved_units, budget.spent_units) == (40, 0)
    await store.release_session("a")  # the worker's stream broke
    await store.settle_ended()
    await store.settle_ended()
    [budget] = await store.budgets("default", ["namespace"])
    assert (budget.reserved_units, budget.spent_units) == (0, 40)
    await store.settle(grant.lease, 5, 0)  # a late report changes nothing
    [budget] = await store.budgets("default", ["namespace"])
    assert (budget.reserved_units, budget.spent_units) == (0, 40)


async def test_a_run_budget_comes_with_its_start_and_a_relayed_copy_resets_nothing(
    store: TaskStore,
) -> None:
    start = run("agent-1", run_budget=RunBudget(units=50, cost=None))
    await store.enqueue([start])
    await store.enqueue([step("agent-1", estimate=30)])
    grants = (await granted(store, "a")).grants
    assert sorted(g.step_id for g in grants) == ["", "call"]
    await store.enqueue([start])  # the outbox relayed the start twice
    [budget] = await store.budgets("default", ["run"], "agent-1")
    assert (budget.limit_units, budget.reserved_units) == (50, 30)


async def test_a_small_tenant_is_served_beside_a_large_one(store: TaskStore) -> None:
    await store.enqueue([run(f"big-{i}", fairness_key="tenant:big") for i in range(200)])
    await store.enqueue([run(f"small-{i}", fairness_key="tenant:small") for i in range(5)])
    order: list[str] = []
    for _ in range(12):  # a worker with one free slot, finishing each run at once
        [grant] = (await granted(store, "a", limit=1)).grants
        order.append(grant.workflow_id.split("-")[0])
        await store.release("a", grant.lease)
    assert order.count("small") == 5, order  # turn by turn, not after the 200
    assert order[:10].count("small") == 5, order


async def test_a_weighted_key_gets_its_weight_in_turns(store: TaskStore) -> None:
    await store.set_limit("default", KeyLimit("tenant:gold", fairness_weight=3))
    await store.enqueue([run(f"gold-{i}", fairness_key="tenant:gold") for i in range(30)])
    await store.enqueue([run(f"free-{i}", fairness_key="tenant:free") for i in range(30)])
    claimed = await granted(store, "a", limit=20)
    kinds = [g.workflow_id.split("-")[0] for g in claimed.grants]
    assert kinds.count("gold") == 15 and kinds.count("free") == 5, kinds


async def test_a_higher_priority_is_granted_first(store: TaskStore) -> None:
    await store.enqueue([run(f"low-{i}", priority=5) for i in range(5)])
    await store.enqueue([run(f"high-{i}", priority=1) for i in range(3)])
    claimed = await granted(store, "a", limit=4)
    assert sorted(g.workflow_id.split("-")[0] for g in claimed.grants) == ["high"] * 3 + ["low"]


async def test_a_rate_grants_its_requests_per_second_and_says_when_to_look_again(
    store: TaskStore,
) -> None:
    await store.set_limit("default", KeyLimit("provider:x", requests_per_second=20))
    await store.enqueue([step(f"wf-{i}", keys=("provider:x",)) for i in range(100)])
    loop = asyncio.get_running_loop()
    started = loop.time()
    grants = 0
    while loop.time() - started < 1.0:
        claimed = await granted(store, "a")
        grants += len(claimed.grants)
        if claimed.retry_in is not None:
            assert 0 < claimed.retry_in <= 0.05 + 1e-6
            await asyncio.sleep(claimed.retry_in)
    # 20 a second, plus a burst of two: never more, and close to it.
    assert 16 <= grants <= 23, grants


async def test_units_per_minute_are_drawn_at_the_estimate_and_the_report_gives_back_the_rest(
    store: TaskStore,
) -> None:
    # 600 a minute: 10 a second, a burst of ten seconds' worth (100).
    await store.set_limit("default", KeyLimit("provider:tokens", units_per_minute=600))
    await store.enqueue(
        [step(f"wf-{i}", keys=("provider:tokens",), estimate=100) for i in range(3)]
    )
    [first] = (await granted(store, "a")).grants  # the burst's 100, all drawn
    waiting = await granted(store, "a")
    assert not waiting.grants and waiting.retry_in is not None and waiting.retry_in > 5
    await done(store, "a", first, units=0)  # it used none: all 100 given back
    [second] = (await granted(store, "a")).grants
    await done(store, "a", second, units=100)
    held = await granted(store, "a")
    assert not held.grants  # the allowance is spent again: 100 more take ten seconds
    assert held.retry_in is not None and held.retry_in > 5
