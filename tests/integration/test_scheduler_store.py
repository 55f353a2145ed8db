"""The scheduler's TaskStore against a real PostgreSQL: leases, fences, due times, contention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from perdure.common.db import open_pool
from perdure.common.migrate import apply_migrations
from perdure.scheduler.grants import CLAIM
from perdure.scheduler.model import DueReason, DueTask, Grant, Lease
from perdure.scheduler.store import TaskStore

QUEUE = "default"
TYPE = "checkout"
TTL = 30.0
SHORT_TTL = 0.1
PAST_EXPIRY = 0.25  # comfortably longer than SHORT_TTL


@pytest.fixture
async def pool(database_dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    async with await psycopg.AsyncConnection.connect(database_dsn, autocommit=True) as conn:
        await apply_migrations(conn, "scheduler", "perdure.scheduler")
    pool = await open_pool(database_dsn, max_size=4)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def store(pool: AsyncConnectionPool) -> TaskStore:
    return TaskStore(pool)


async def row(pool: AsyncConnectionPool, workflow_id: str) -> dict[str, Any]:
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT fence, lease_owner, run_at, lease_expires_at, now() AS db_now"
            " FROM scheduler.tasks WHERE workflow_id = %s",
            [workflow_id],
        )
        found = await cursor.fetchone()
        assert found is not None, workflow_id
        assert cursor.description is not None
        return dict(zip([c.name for c in cursor.description], found, strict=True))


def task(
    workflow_id: str,
    run_at: datetime | None = None,
    *,
    workflow_type: str = TYPE,
    queue: str = QUEUE,
    reason: DueReason | None = None,
    trace_context: dict[str, str] | None = None,
    fence_floor: int = 0,
) -> DueTask:
    return DueTask(
        workflow_id, "", workflow_type, queue, run_at, reason, trace_context, fence_floor
    )


@dataclass(frozen=True)
class Leased:
    """What a grant says about the lease (its timing and tracing fields left out)."""

    workflow_id: str
    workflow_type: str
    fence: int
    previous_owner: str | None


async def claim_grants(
    store: TaskStore, session: str, *, limit: int = 10, ttl: float = TTL
) -> list[Grant]:
    return await store.claim(session, QUEUE, [TYPE], [], limit, ttl)


async def claim(
    store: TaskStore, session: str, *, limit: int = 10, ttl: float = TTL
) -> list[Leased]:
    grants = await claim_grants(store, session, limit=limit, ttl=ttl)
    return [Leased(g.workflow_id, g.task_type, g.fence, g.previous_owner) for g in grants]


def hours(n: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=n)


# --- grants and fences ---------------------------------------------------------------------------


async def test_enqueue_then_claim_grants_fence_1(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("wf-1")])

    grants = await claim(store, "s1")

    assert grants == [Leased("wf-1", TYPE, 1, None)]
    state = await row(pool, "wf-1")
    assert state["lease_owner"] == "s1"
    assert state["run_at"] is None
    assert timedelta(seconds=TTL - 5) < state["lease_expires_at"] - state["db_now"]
    assert state["lease_expires_at"] - state["db_now"] <= timedelta(seconds=TTL)


async def test_a_leased_task_is_not_granted_again(store: TaskStore) -> None:
    await store.enqueue([task("wf-1")])
    assert len(await claim(store, "s1")) == 1

    assert await claim(store, "s1") == []
    assert await claim(store, "s2") == []


async def test_new_work_during_a_lease_waits_for_the_release(store: TaskStore) -> None:
    await store.enqueue([task("wf-1")])
    [first] = await claim(store, "s1")
    await store.enqueue([task("wf-1")])  # e.g. a timer fired while the worker runs it

    assert await claim(store, "s2") == []
    assert await store.release("s1", Lease("wf-1", "", first.fence))
    assert await claim(store, "s2") == [Leased("wf-1", TYPE, 2, None)]


async def test_release_and_enqueue_again_grants_fence_2(store: TaskStore) -> None:
    await store.enqueue([task("wf-1")])
    [first] = await claim(store, "s1")
    await store.release("s1", Lease("wf-1", "", first.fence))

    assert await claim(store, "s1") == []  # released with no new work: nothing is due

    await store.enqueue([task("wf-1")])
    assert await claim(store, "s2") == [Leased("wf-1", TYPE, 2, None)]


async def test_fences_only_grow(store: TaskStore) -> None:
    fences = []
    for _ in range(4):
        await store.enqueue([task("wf-1")])
        [grant] = await claim(store, "s1")
        fences.append(grant.fence)
        await store.release("s1", Lease("wf-1", "", grant.fence))
    assert fences == [1, 2, 3, 4]


async def test_release_with_a_stale_fence_does_nothing(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("wf-1")])
    await claim(store, "s1", ttl=SHORT_TTL)
    await asyncio.sleep(PAST_EXPIRY)
    [taken] = await claim(store, "s2")

    assert not await store.release("s1", Lease("wf-1", "", 1))  # the first holder finishing late

    assert (await row(pool, "wf-1"))["lease_owner"] == "s2"
    assert taken.fence == 2


@pytest.mark.parametrize("again", [False, True])
async def test_only_the_session_holding_a_lease_may_release_it(
    store: TaskStore, pool: AsyncConnectionPool, again: bool
) -> None:
    await store.enqueue([task("wf-1")])
    [grant] = await claim(store, "holder")
    before = await row(pool, "wf-1")

    # Another session naming the very lease, fence included, changes nothing.
    assert not await store.release("intruder", Lease("wf-1", "", grant.fence), again=again)

    after = await row(pool, "wf-1")
    assert {k: after[k] for k in ("fence", "lease_owner", "run_at", "lease_expires_at")} == {
        k: before[k] for k in ("fence", "lease_owner", "run_at", "lease_expires_at")
    }
    assert await claim(store, "intruder") == []  # not handed back: not granted again
    assert await store.release("holder", Lease("wf-1", "", grant.fence), again=again)
    assert (await row(pool, "wf-1"))["lease_owner"] is None


# --- due times -----------------------------------------------------------------------------------


async def test_a_future_run_at_is_not_claimable_yet(store: TaskStore) -> None:
    await store.enqueue([task("later", hours(1)), task("past", hours(-1))])

    assert [g.workflow_id for g in await claim(store, "s1")] == ["past"]
    assert await claim(store, "s1") == []


async def test_a_grant_says_when_it_was_due_why_and_in_which_trace(store: TaskStore) -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    await store.enqueue([task("timed", hours(-1), reason=DueReason.TIMER, trace_context=carrier)])
    await store.enqueue([task("now")])

    grants = {g.workflow_id: g for g in await claim_grants(store, "s1")}

    timed, immediate = grants["timed"], grants["now"]
    assert timed.due_reason == "timer" and timed.trace_context == carrier
    assert 3590 < timed.late_by < 3700  # due an hour ago, on the database clock
    assert immediate.due_reason is None and immediate.trace_context is None
    assert 0 <= immediate.late_by < 60


async def test_the_winning_due_time_keeps_its_reason(store: TaskStore) -> None:
    await store.enqueue([task("a", hours(-1), reason=DueReason.RETRY)])
    await store.enqueue([task("a", hours(1), reason=DueReason.TIMER)])  # later: loses
    await store.enqueue([task("b", hours(1), reason=DueReason.TIMER)])
    await store.enqueue([task("b")])  # a wake-up now (a signal) beats the timer

    grants = {g.workflow_id: g.due_reason for g in await claim_grants(store, "s1")}

    assert grants == {"a": "retry", "b": None}


async def test_backlog_counts_due_unleased_tasks_per_known_queue(store: TaskStore) -> None:
    await store.register_types(QUEUE, [TYPE])
    await store.register_types("idle", [TYPE])
    await store.enqueue([task("a"), task("b"), task("later", hours(1))])
    await claim(store, "s1", limit=1)

    assert await store.backlog() == {QUEUE: 1, "idle": 0}


async def test_an_earlier_run_at_wins_on_duplicate_enqueue(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    soon, later = hours(-0.5), hours(2)
    await store.enqueue([task("a", later)])
    await store.enqueue([task("a", soon)])
    await store.enqueue([task("b", soon)])
    await store.enqueue([task("b", later)])  # a later request never postpones earlier work

    assert (await row(pool, "a"))["run_at"] == soon
    assert (await row(pool, "b"))["run_at"] == soon
    assert sorted(g.workflow_id for g in await claim(store, "s1")) == ["a", "b"]


async def test_one_batch_naming_a_run_twice_keeps_its_earliest_request(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    soon, later = hours(-0.5), hours(2)
    await store.enqueue(
        [
            task("a", later, reason=DueReason.TIMER),
            task("a", soon, reason=DueReason.RETRY),
            task("b", later),
        ]
    )

    assert (await row(pool, "a"))["run_at"] == soon
    assert (await row(pool, "b"))["run_at"] == later
    grants = await claim_grants(store, "s1")
    assert [(g.workflow_id, g.due_reason) for g in grants] == [("a", "retry")]


async def test_only_timers_are_granted_ahead_and_only_to_a_worker_that_asks(
    store: TaskStore,
) -> None:
    soon = hours(30 / 3600)  # in 30 s
    await store.enqueue(
        [task("timer", soon, reason=DueReason.TIMER), task("retry", soon, reason=DueReason.RETRY)]
    )

    assert await store.claim("s1", QUEUE, [TYPE], [], 10, TTL) == []  # no lookahead: not due
    assert await store.claim("s1", QUEUE, [TYPE], [], 10, TTL, timer_lookahead=5) == []  # too soon
    assert 24 < (await store.next_due([QUEUE], timer_lookahead=5) or 0) <= 25
    [grant] = await store.claim("s1", QUEUE, [TYPE], [], 10, TTL, timer_lookahead=31)
    assert (grant.workflow_id, grant.due_reason) == ("timer", "timer")
    assert -30 < grant.late_by < -29  # granted ahead: the worker waits out the rest
    assert await store.claim("s2", QUEUE, [TYPE], [], 10, TTL, timer_lookahead=31) == []


async def test_now_wins_over_a_future_run_at(store: TaskStore) -> None:
    await store.enqueue([task("a", hours(3))])
    assert await claim(store, "s1") == []
    await store.enqueue([task("a")])
    assert [g.workflow_id for g in await claim(store, "s1")] == ["a"]


async def test_the_earliest_due_task_is_granted_first(store: TaskStore) -> None:
    await store.enqueue(
        [task("third", hours(-1)), task("first", hours(-3)), task("second", hours(-2))]
    )
    order = [g.workflow_id for _ in range(3) for g in await claim(store, "s1", limit=1)]
    assert order == ["first", "second", "third"]


async def test_claim_respects_the_limit(store: TaskStore) -> None:
    await store.enqueue([task(f"wf-{i}") for i in range(5)])
    assert len(await claim(store, "s1", limit=2)) == 2
    assert len(await claim(store, "s1", limit=2)) == 2
    assert len(await claim(store, "s1", limit=2)) == 1


async def test_an_expired_lease_is_granted_before_tasks_long_due(store: TaskStore) -> None:
    await store.enqueue([task("leased")])
    await claim(store, "s1", ttl=SHORT_TTL)
    await store.enqueue([task(f"due-{i}", hours(-i - 1)) for i in range(3)])
    await asyncio.sleep(PAST_EXPIRY)
    order = [g.workflow_id for _ in range(4) for g in await claim(store, "s2", limit=1)]
    assert order == ["leased", "due-2", "due-1", "due-0"]


async def test_a_claim_reads_only_the_due_tasks_it_grants(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    # 10,000 timers due at once made every claim sort them all, each taking milliseconds of
    # the database's time; each claim now scans its index in due order and stops at its limit.
    await store.enqueue([task(f"due-{i:04}", hours(-1)) for i in range(2000)])
    async with pool.connection() as conn:
        await conn.execute("ANALYZE scheduler.tasks")
        cur = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + CLAIM,
            {
                "key": "",
                "task_queue": QUEUE,
                "types": [TYPE],
                "step_types": [],
                "limit": 2,
                "session": "s1",
                "ttl": TTL,
                "timer_lookahead": 0.0,
                "sticky_ids": [],
                "sticky_timeout": 0.0,
                "build": None,
                "namespace": "default",
                "newest": [],
            },
        )
        [(plan,)] = await cur.fetchall()
        await conn.rollback()
    scans = [node for node in _plan_nodes(plan[0]["Plan"]) if "Scan" in node["Node Type"]]
    assert {node["Relation Name"] for node in scans if "Relation Name" in node} >= {"tasks"}
    assert max(node["Actual Rows"] for node in scans) <= 2, scans


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


# --- expiry and renewal --------------------------------------------------------------------------


async def test_an_expired_lease_goes_to_another_session_with_a_higher_fence(
    store: TaskStore,
) -> None:
    await store.enqueue([task("wf-1")])
    assert await claim(store, "s1", ttl=SHORT_TTL) == [Leased("wf-1", TYPE, 1, None)]
    assert await claim(store, "s2") == []  # not expired yet

    await asyncio.sleep(PAST_EXPIRY)

    assert await claim(store, "s2") == [Leased("wf-1", TYPE, 2, "s1")]
    assert await store.renew("s1", [Lease("wf-1", "", 1)], TTL) == set()  # the old holder is out


async def test_renew_only_renews_matching_fences(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("a"), task("b")])
    grants = {g.workflow_id: g.fence for g in await claim(store, "s1", ttl=SHORT_TTL)}
    assert grants == {"a": 1, "b": 1}

    renewed = await store.renew(
        "s1", [Lease("a", "", 1), Lease("b", "", 7), Lease("unknown", "", 1)], TTL
    )

    assert renewed == {Lease("a", "", 1)}
    await asyncio.sleep(PAST_EXPIRY)
    # "a" was extended and stays with s1; "b" kept its short lease and is taken over.
    assert await claim(store, "s2") == [Leased("b", TYPE, 2, "s1")]
    assert (await row(pool, "a"))["lease_owner"] == "s1"


async def test_renew_own_extends_a_keys_leases_from_any_session_and_says_when_they_expire(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("a"), task("b"), task("c")])
    await store.claim("broken-stream", QUEUE, [TYPE], [], 10, SHORT_TTL, key="k1")
    await store.release("broken-stream", Lease("c", "", 1))

    renewal = await store.renew_own(
        "k1", [Lease("a", "", 1), Lease("b", "", 7), Lease("c", "", 1)], TTL
    )
    now, renewed = renewal.now, renewal.expiries
    other_key = (await store.renew_own("k2", [Lease("a", "", 1)], TTL)).expiries

    # Only "a": "b" has another fence, "c" was released; another key renews nothing.
    assert list(renewed) == [Lease("a", "", 1)] and other_key == {}
    assert renewed[Lease("a", "", 1)] - now == timedelta(seconds=TTL)
    assert (await row(pool, "a"))["lease_owner"] == "broken-stream"  # only a hello moves it
    await asyncio.sleep(PAST_EXPIRY)
    assert [g.workflow_id for g in await claim(store, "s2")] == ["b"]  # "a" stands


async def test_renew_own_of_nothing_reads_the_database_clock(store: TaskStore) -> None:
    renewal = await store.renew_own("k1", [], TTL)
    assert renewal.expiries == {} and abs(renewal.now - datetime.now(UTC)) < timedelta(seconds=5)


async def test_renew_of_a_released_lease_does_nothing(store: TaskStore) -> None:
    await store.enqueue([task("a")])
    await claim(store, "s1")
    await store.release("s1", Lease("a", "", 1))
    assert await store.renew("s1", [Lease("a", "", 1)], TTL) == set()


async def test_renew_of_nothing_is_empty(store: TaskStore) -> None:
    assert await store.renew("s1", [], TTL) == set()


async def test_a_heartbeat_renews_only_the_sessions_own_leases(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("a")])
    await store.claim("holder", QUEUE, [TYPE], [], 10, SHORT_TTL, key="k1")
    before = await row(pool, "a")

    # Even a session of the same key cannot renew (and so take) a lease it was not granted.
    assert await store.renew("other", [Lease("a", "", 1)], TTL) == set()

    after = await row(pool, "a")
    assert (after["lease_owner"], after["lease_expires_at"]) == (
        "holder",
        before["lease_expires_at"],
    )
    assert await store.renew("holder", [Lease("a", "", 1)], TTL) == {Lease("a", "", 1)}


async def test_a_reconnected_session_adopts_the_leases_of_its_key_and_queue(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("a"), task("b", queue="q2")])
    await store.claim("old-session", QUEUE, [TYPE], [], 10, TTL, key="k1")
    await store.claim("old-q2-session", "q2", [TYPE], [], 10, TTL, key="k1")
    a, b = Lease("a", "", 1), Lease("b", "", 1)

    # Another key, or the same key on another queue, adopts nothing.
    assert await store.adopt("new-session", [a], TTL, key="k2", task_queue=QUEUE) == set()
    assert await store.adopt("new-session", [b], TTL, key="k1", task_queue=QUEUE) == set()
    assert (await row(pool, "a"))["lease_owner"] == "old-session"
    assert (await row(pool, "b"))["lease_owner"] == "old-q2-session"

    assert await store.adopt("new-session", [a, b], TTL, key="k1", task_queue=QUEUE) == {a}
    assert (await row(pool, "a"))["lease_owner"] == "new-session"
    # The old session is out: it can neither renew nor release what moved.
    assert await store.renew("old-session", [a], TTL) == set()
    assert not await store.release("old-session", a)
    assert await store.release("new-session", a)


# --- sessions ------------------------------------------------------------------------------------


async def test_release_session_makes_its_tasks_due_again(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("a"), task("b")])
    await claim(store, "s1", limit=2)
    await store.enqueue([task("c")])
    await claim(store, "s2")

    assert sorted(await store.release_session("s1")) == [("a", ""), ("b", "")]

    state = await row(pool, "a")
    assert state["lease_owner"] is None and state["lease_expires_at"] is None
    assert state["run_at"] is not None
    grants = await claim(store, "s3")
    assert sorted(grants, key=lambda g: g.workflow_id) == [
        Leased("a", TYPE, 2, None),
        Leased("b", TYPE, 2, None),
    ]
    assert (await row(pool, "c"))["lease_owner"] == "s2"


async def test_release_session_of_an_unknown_session_is_empty(store: TaskStore) -> None:
    await store.enqueue([task("a")])
    await claim(store, "s1")
    assert await store.release_session("nobody") == []
    assert await claim(store, "s2") == []


# --- filtering -----------------------------------------------------------------------------------


async def test_claims_only_return_the_requested_types_and_queue(store: TaskStore) -> None:
    await store.enqueue(
        [
            task("q1-t1", queue="q1", workflow_type="t1"),
            task("q1-t2", queue="q1", workflow_type="t2"),
            task("q2-t1", queue="q2", workflow_type="t1"),
        ]
    )

    assert await store.claim("s", "q1", ["t3"], [], 10, TTL) == []
    assert await store.claim("s", "q3", ["t1", "t2"], [], 10, TTL) == []
    assert await store.claim("s", "q1", [], [], 10, TTL) == []
    assert [g.workflow_id for g in await store.claim("s", "q1", ["t1"], [], 10, TTL)] == ["q1-t1"]
    assert [
        (g.workflow_id, g.task_type)
        for g in await store.claim("s", "q1", ["t2", "t9"], [], 10, TTL)
    ] == [("q1-t2", "t2")]
    assert [g.workflow_id for g in await store.claim("s", "q2", ["t1", "t2"], [], 10, TTL)] == [
        "q2-t1"
    ]


# --- contention ----------------------------------------------------------------------------------


async def test_concurrent_claims_never_grant_a_workflow_twice(store: TaskStore) -> None:
    ids = [f"wf-{i:03d}" for i in range(60)]
    await store.enqueue([task(w) for w in ids])

    granted: list[Leased] = []
    for _ in range(20):
        rounds = await asyncio.gather(
            claim(store, "s1", limit=4), claim(store, "s2", limit=4), claim(store, "s3", limit=4)
        )
        batch = [g for grants in rounds for g in grants]
        if not batch:
            break
        granted.extend(batch)

    assert sorted(g.workflow_id for g in granted) == ids  # each exactly once, none lost
    assert {g.fence for g in granted} == {1}


async def test_concurrent_takeover_of_an_expired_lease_has_one_winner(store: TaskStore) -> None:
    await store.enqueue([task(f"wf-{i}") for i in range(10)])
    await claim(store, "s0", ttl=SHORT_TTL)
    await asyncio.sleep(PAST_EXPIRY)

    first, second = await asyncio.gather(claim(store, "s1"), claim(store, "s2"))

    taken = [g.workflow_id for g in first + second]
    assert sorted(taken) == [f"wf-{i}" for i in range(10)]
    assert all(g.fence == 2 and g.previous_owner == "s0" for g in first + second)


# --- workflow types ------------------------------------------------------------------------------


async def test_registered_types_are_per_queue_sorted_and_deduplicated(store: TaskStore) -> None:
    await store.register_types("q1", ["zeta", "alpha"])
    await store.register_types("q1", ["alpha", "mid"])
    await store.register_types("q2", ["other"])

    assert await store.registered_types("q1") == ["alpha", "mid", "zeta"]
    assert await store.registered_types("q2") == ["other"]
    assert await store.registered_types("q3") == []


async def test_step_tasks_have_their_own_lease_and_go_to_sessions_serving_their_step_type(
    store: TaskStore,
) -> None:
    step_task = DueTask("wf-1", "charge", "charge", QUEUE)
    await store.enqueue([task("wf-1"), step_task])

    # A session serving the step type only gets the step task, and a workflow's session only
    # the workflow task: the same workflow id, two tasks, two fences.
    [step] = await store.claim("steps", QUEUE, [], ["charge"], 10, TTL)
    [run] = await store.claim("runs", QUEUE, [TYPE, "charge"], [], 10, TTL)
    assert (step.workflow_id, step.step_id, step.task_type, step.fence) == (
        "wf-1",
        "charge",
        "charge",
        1,
    )
    assert (run.workflow_id, run.step_id, run.task_type, run.fence) == ("wf-1", "", TYPE, 1)

    # Renewal and release name the step: the workflow's lease is untouched by the step's.
    assert await store.renew("steps", [Lease("wf-1", "charge", 1)], TTL) == {
        Lease("wf-1", "charge", 1)
    }
    await store.release("steps", Lease("wf-1", "charge", 1))
    assert await store.renew("runs", [Lease("wf-1", "", 1)], TTL) == {Lease("wf-1", "", 1)}


# --- fence floors and closed runs ------------------------------------------------------------


async def test_a_grant_is_above_the_fence_floor_history_sends(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    # A scheduler database reset to empty: history's mark (41) is far above the counter.
    await store.enqueue([task("wf-1", fence_floor=41)])
    assert [g.fence for g in await claim(store, "s1")] == [42]
    await store.release("s1", Lease("wf-1", "", 42))
    # A floor below the counter changes nothing; one above raises it.
    await store.enqueue([task("wf-1", fence_floor=7)])
    assert [g.fence for g in await claim(store, "s1")] == [43]
    await store.release("s1", Lease("wf-1", "", 43))
    await store.enqueue([task("wf-1", fence_floor=100)])
    assert [g.fence for g in await claim(store, "s1")] == [101]


async def test_a_closed_runs_tasks_are_never_due_again(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("wf-1")])
    [leased] = await claim(store, "s1")
    await store.enqueue([], closed=[("wf-1", 1)])
    # Handed back, the lease of a closed run leaves nothing due; later requests neither.
    await store.release("s1", Lease("wf-1", "", leased.fence), again=True)
    await store.enqueue([task("wf-1")])
    assert await claim(store, "s2") == []
    assert (await row(pool, "wf-1"))["run_at"] is None


async def test_a_newer_run_reopens_a_closed_task_and_an_older_run_s_request_does_not(
    store: TaskStore, pool: AsyncConnectionPool
) -> None:
    await store.enqueue([task("chain")])
    [leased] = await claim(store, "s1")
    await store.release("s1", Lease("chain", "", leased.fence))
    await store.enqueue([], closed=[("chain", 1)])
    # A late request of run 1 leaves it closed; run 2's reopens it, above every fence given.
    await store.enqueue([task("chain")])
    assert await claim(store, "s2") == []
    await store.enqueue([replace(task("chain"), run_number=2)])
    [second] = await claim(store, "s2")
    assert second.fence > leased.fence
    await store.release("s2", Lease("chain", "", second.fence))
    # Run 1's close and requests, relayed late, change nothing of run 2's task.
    await store.enqueue([task("chain")], closed=[("chain", 1)])
    assert await claim(store, "s3") == []
    await store.enqueue([replace(task("chain"), run_number=2)])
    [third] = await claim(store, "s3")
    assert third.fence > second.fence


async def test_a_resumed_run_reopens_its_own_closed_task_only(store: TaskStore) -> None:
    await store.enqueue([task("parked")])
    [leased] = await claim(store, "s1")
    await store.release("s1", Lease("parked", "", leased.fence))
    await store.enqueue([], closed=[("parked", 1)])  # the run parked
    # A resume of run 1 reopens its task, above every fence given; one of an older run does not.
    await store.enqueue([replace(task("parked"), run_number=2)], closed=[("parked", 2)])
    await store.enqueue([replace(task("parked"), reopens=True)])
    assert await claim(store, "s2") == []
    await store.enqueue([replace(task("parked"), run_number=2, reopens=True)])
    [resumed] = await claim(store, "s2")
    assert resumed.fence > leased.fence
    # A remote step's task of the run reopens the same way, by its step id.
    step = replace(task("parked-step"), step_id="resize")
    await store.enqueue([step])
    await store.enqueue([], closed=[("parked-step", 1)])
    assert await store.claim("s3", QUEUE, [], [TYPE], 10, TTL) == []
    await store.enqueue([replace(step, reopens=True)])
    [reopened] = await store.claim("s3", QUEUE, [], [TYPE], 10, TTL)
    assert (reopened.workflow_id, reopened.step_id) == ("parked-step", "resize")


async def test_idle_runs_are_those_with_no_lease_and_no_due_time(store: TaskStore) -> None:
    await store.enqueue([task("due"), task("leased"), task("done"), task("later", hours(1))])
    [leased, done] = await store.claim("s1", QUEUE, [TYPE], [], 2, TTL)
    assert {leased.workflow_id, done.workflow_id} <= {"due", "leased", "done", "later"}
    await store.release("s1", Lease(done.workflow_id, "", done.fence))
    asked = ["due", "leased", "done", "later", "unknown"]
    idle = set(await store.idle_runs(asked))
    # Released with nothing due, or never heard of (a reset table): idle. Due or leased: not.
    assert idle == {done.workflow_id, "unknown"}


# --- lock order ----------------------------------------------------------------------------------

# Two tasks stored in the reverse of their key order ("late" first), both leased to "s1" with
# API key "k1", and the statements that change several of them at once: each must lock them in
# key order.
EARLY, LATE = Lease("early", "", 1), Lease("late", "", 1)
CHANGES_SEVERAL: dict[str, Callable[[TaskStore], Coroutine[Any, Any, object]]] = {
    "heartbeat": lambda store: store.renew("s1", [LATE, EARLY], TTL),
    "hello": lambda store: store.adopt("s2", [LATE, EARLY], TTL, key="k1", task_queue=QUEUE),
    "renewal": lambda store: store.renew_own("k1", [LATE, EARLY], TTL),
    "session end": lambda store: store.release_session("s1"),
    "runs closed": lambda store: store.enqueue([], closed=[("late", 1), ("early", 1)]),
    "batch": lambda store: store.enqueue([task("late")], closed=[("early", 1)]),
}


@pytest.mark.parametrize("statement", list(CHANGES_SEVERAL))
async def test_statements_changing_several_tasks_lock_them_in_key_order(
    store: TaskStore, database_dsn: str, statement: str
) -> None:
    """Another transaction holds "early" and will want "late" next. A statement that took
    "late" first and then waited for "early" would close a cycle, and PostgreSQL would end one
    of the two with a deadlock error (which once ended a worker's stream and the TaskDones on
    it). In key order, the statement waits for "early" holding nothing, and both go through."""
    await store.enqueue([task("late")])
    await store.enqueue([task("early")])
    await store.claim("s1", QUEUE, [TYPE], [], 10, TTL, key="k1")
    async with await psycopg.AsyncConnection.connect(database_dsn) as other:
        await other.execute("SELECT 1 FROM scheduler.tasks WHERE workflow_id = 'early' FOR UPDATE")
        changing: asyncio.Task[object] = asyncio.create_task(CHANGES_SEVERAL[statement](store))
        await _until_waiting_for_a_lock(database_dsn, changing)
        await other.execute(
            "UPDATE scheduler.tasks SET updated_at = now() WHERE workflow_id = 'late'"
        )
        await other.commit()
    await asyncio.wait_for(changing, timeout=30)


async def _until_waiting_for_a_lock(database_dsn: str, changing: asyncio.Task[object]) -> None:
    """Until some session waits for a row lock on the tasks (the statement under test)."""
    async with await psycopg.AsyncConnection.connect(database_dsn, autocommit=True) as watcher:
        for _ in range(3000):
            assert not changing.done(), "the statement did not wait for the held row"
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND query LIKE '%%scheduler.tasks%%'"
            )
            found = await cursor.fetchone()
            if found is not None and found[0] > 0:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the statement never waited for the held row")
