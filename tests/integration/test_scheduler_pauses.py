"""Pauses and debounced due times in the scheduler's store, against a real PostgreSQL: which
tasks a claim grants while a workflow id, a workflow type (its step tasks too) or a task queue
is paused, in its namespace only; and a debounced run's later due time, which applies only
while the run was never granted."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from perdure.common import namespaces
from perdure.scheduler.model import Build, DueTask
from perdure.scheduler.pauses import Scope
from perdure.scheduler.store import TaskStore
from tests.integration.test_scheduler_store import pool, store, task

__all__ = ["pool", "store"]  # the fixtures, shared with the store's other tests

QUEUE = "default"
STEP_TYPE = "resize"


def step_task(workflow_id: str, queue: str = QUEUE) -> DueTask:
    """A remote step of `workflow_id`, of type STEP_TYPE."""
    return replace(task(workflow_id, queue=queue), step_id="s1", task_type=STEP_TYPE)


async def granted(store: TaskStore, queue: str = QUEUE, namespace: str = "default") -> set[str]:
    """What one claim of a session serving the type and the step type grants: each task as
    "<workflow id>" or "<workflow id>/<step id>"."""
    grants = await store.claim(
        "session",
        queue,
        ["checkout", "other"],
        [STEP_TYPE],
        100,
        30.0,
        build=Build(namespace=namespace),
    )
    return {f"{g.workflow_id}/{g.step_id}" if g.step_id else g.workflow_id for g in grants}


async def test_a_paused_workflow_id_is_granted_nothing_until_unpaused(store: TaskStore) -> None:
    await store.enqueue([task("held"), step_task("held"), task("free")])
    await store.pause("default", Scope.WORKFLOW, "held", "", "")
    assert await granted(store) == {"free"}
    assert await store.unpause("default", Scope.WORKFLOW, "held")
    assert await granted(store) == {"held", "held/s1"}


async def test_a_paused_type_holds_its_runs_step_tasks_too(store: TaskStore) -> None:
    await store.enqueue([task("a"), task("b", workflow_type="other")])
    await store.enqueue([step_task("a"), step_task("b")])
    await store.pause("default", Scope.WORKFLOW_TYPE, "checkout", "", "")
    assert await granted(store) == {"b", "b/s1"}
    await store.unpause("default", Scope.WORKFLOW_TYPE, "checkout")
    assert await granted(store) == {"a", "a/s1"}


async def test_a_paused_queue_holds_every_task_on_it_in_its_namespace_only(
    store: TaskStore,
) -> None:
    other = namespaces.qualify("team-b", QUEUE)
    await store.enqueue([task("a"), step_task("a"), task("@team-b/a", queue=other)])
    await store.pause("default", Scope.TASK_QUEUE, QUEUE, "", "")
    assert await granted(store) == set()
    assert await granted(store, other, "team-b") == {"@team-b/a"}
    await store.unpause("default", Scope.TASK_QUEUE, QUEUE)
    assert await granted(store) == {"a", "a/s1"}


async def test_pausing_twice_keeps_the_first_pause(store: TaskStore) -> None:
    first, made = await store.pause("default", Scope.TASK_QUEUE, QUEUE, "first", "k1")
    again, made_again = await store.pause("default", Scope.TASK_QUEUE, QUEUE, "second", "k2")
    assert (made, made_again) == (True, False)
    assert again == first and again.reason == "first"
    assert await store.pause_counts() == {("default", "task_queue"): 1}
    assert await store.unpause("default", Scope.TASK_QUEUE, QUEUE)
    assert not await store.unpause("default", Scope.TASK_QUEUE, QUEUE)


async def test_a_debounced_due_time_moves_later_only_before_the_first_grant(
    store: TaskStore,
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    await store.enqueue([task("granted")])
    (grant,) = await store.claim("s", QUEUE, ["checkout"], [], 100, 30.0)
    assert await store.release("s", grant.lease, again=True)  # handed back, due now
    await store.enqueue([task("fresh")])

    await store.enqueue([replace(task(w, later), delays=True) for w in ("fresh", "granted")])
    # The never-granted run waits for its later time; the one granted before stays due now.
    assert await granted(store) == {"granted"}
