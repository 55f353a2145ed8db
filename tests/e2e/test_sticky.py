"""Sticky execution end to end (real processes): a run's worker keeps it suspended between its
turns and resumes it without replaying; a lost or outdated cache falls back to a replay from
the start, with the same result and journal and no step run twice."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.ledger import ledger_fields
from tests.fixtures.postgres import Databases
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.sticky_workflows"
WAIT = 60.0
TURNS = 20


@pytest.fixture(scope="module")
def sticky_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One cluster for the module, with a short lease TTL (a stopped worker's lease expires
    soon); each test starts its own workers, on a task queue of its own."""
    with databases.fresh() as dsn:
        cluster = Cluster(
            dsn, tmp_path_factory.mktemp("sticky"), env_overrides={"PERDURE_LEASE_TTL": "2"}
        )
        try:
            cluster.start_services()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def client(sticky_cluster: Cluster) -> Iterator[Client]:
    with sticky_cluster.client() as connected:
        yield connected


def worker(cluster: Cluster, identity: str, queue: str, **env: Any) -> Process:
    return cluster.start_worker(identity, module=MODULE, task_queue=queue, **env)


def marks(ledger: Path) -> Counter[str]:
    """How often each point was passed (or step body run), whichever worker did."""
    return Counter(what for what, _ in ledger_fields(ledger))


def by(ledger: Path, identity: str) -> list[str]:
    """The points the worker `identity` passed, in order."""
    return [what for what, who in ledger_fields(ledger) if who == identity]


def converse(client: Client, workflow_id: str, ledger: Path, turns: range) -> None:
    """Send each turn's message once the turn before has its step's outcome journaled (the
    step's body has run before that; a worker killed or stopped once the body ran but before
    its outcome was recorded would rightly run the step again)."""
    for turn in turns:
        client.signal(workflow_id, "message", f"msg-{turn}")
        reply = expected_journal(turn + 1)[-1]
        wait_until(lambda r=reply: r in journal(client, workflow_id), WAIT, f"turn {turn}")
        assert marks(ledger)[f"step-{turn}"] > 0


def journal(client: Client, workflow_id: str) -> list[tuple[int, str, str]]:
    """The run's calls as its journal holds them: (position, step id, recorded value, its
    padding left out)."""
    return [
        (e.position, e.step_id, from_payload(e.payload).rstrip("."))
        for e in client.history(workflow_id)
        if e.event_type in (wf.EVENT_TYPE_SIGNAL_CONSUMED, wf.EVENT_TYPE_STEP_COMPLETED)
    ]


def expected_journal(turns: int) -> list[tuple[int, str, str]]:
    def occurrence(name: str, turn: int) -> str:
        return name if turn == 0 else f"{name}#{turn + 1}"

    calls = []
    for turn in range(turns):
        calls.append((2 * turn, occurrence("$signal:message", turn), f"msg-{turn}"))
        calls.append((2 * turn + 1, occurrence("reply", turn), f"{turn}:msg-{turn}"))
    return calls


def finished(client: Client, workflow_id: str, turns: int) -> None:
    """The run completed with every turn's reply, its journal holds each call once, and no step
    was recorded as failed (or run twice: the ledgers say so)."""
    described = client.wait(workflow_id, timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
    assert result_of(described) == [f"{t}:msg-{t}" for t in range(turns)]
    assert journal(client, workflow_id) == expected_journal(turns)


def test_a_kept_run_resumes_on_its_worker_without_running_its_code_again(
    sticky_cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    keeper = worker(sticky_cluster, "keeper", "sticky-resume")
    client.start_workflow(
        "chat",
        {"ledger": str(ledger), "turns": TURNS},
        workflow_id="resume-1",
        task_queue="sticky-resume",
    )
    converse(client, "resume-1", ledger, range(TURNS))
    finished(client, "resume-1", TURNS)

    # Each point of the code passed once: every turn resumed where the last one waited (the
    # first message may come before the run's first task, which then does not wait for it).
    points = ["start"] + [p for t in range(TURNS) for p in (f"turn-{t}", f"step-{t}")]
    assert by(ledger, "keeper") == points
    assert keeper.output().count("resumed from the cache") >= TURNS - 1
    keeper.kill()


def test_a_run_whose_worker_was_killed_is_replayed_by_another_with_the_same_outcome(
    sticky_cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    ledger, half = tmp_path / "ledger", TURNS // 2
    first = worker(sticky_cluster, "first", "sticky-kill")
    client.start_workflow(
        "chat",
        {"ledger": str(ledger), "turns": TURNS},
        workflow_id="kill-1",
        task_queue="sticky-kill",
    )
    converse(client, "kill-1", ledger, range(half))
    first.kill()  # SIGKILL: its cache is gone, and the run is still kept for it
    second = worker(sticky_cluster, "second", "sticky-kill")
    converse(client, "kill-1", ledger, range(half, TURNS))
    finished(client, "kill-1", TURNS)

    # The second worker replayed from the start (the sticky timeout over), then kept the run.
    replayed = ["start"] + [f"turn-{t}" for t in range(half)]
    assert by(ledger, "second")[: half + 1] == replayed
    assert all(marks(ledger)[f"step-{t}"] == 1 for t in range(TURNS))
    assert "resumed from the cache" in second.output()
    second.kill()


def test_a_stale_cache_is_never_resumed_after_another_worker_advanced_the_run(
    sticky_cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    ledger, queue = tmp_path / "ledger", "sticky-stale"
    first = worker(sticky_cluster, "first", queue)
    client.start_workflow(
        "chat", {"ledger": str(ledger), "turns": 8}, workflow_id="stale-1", task_queue=queue
    )
    converse(client, "stale-1", ledger, range(3))  # the first worker keeps the run

    second = worker(sticky_cluster, "second", queue)
    first.signal(signal.SIGSTOP)
    converse(client, "stale-1", ledger, range(3, 5))  # the second advances it, and keeps it
    assert by(ledger, "second")[:1] == ["start"]  # a replay: it had nothing kept
    second.signal(signal.SIGTERM)  # a drain: it drops its cache and says goodbye
    assert second.popen.wait(timeout=WAIT) == 0
    first.signal(signal.SIGCONT)
    converse(client, "stale-1", ledger, range(5, 8))
    finished(client, "stale-1", 8)

    # The first worker found its kept state outdated and replayed (from the start) instead.
    assert "its cached state is stale" in first.output()
    assert by(ledger, "first").count("start") == 2
    assert all(marks(ledger)[f"step-{t}"] == 1 for t in range(8))
    first.kill()


@pytest.mark.parametrize(
    ("bound", "setting"),
    [
        ("count", {"PERDURE_WORKER_CACHE_SIZE": "1"}),
        # One run's journal fits until its second turn (3 kB a turn), two runs' do not.
        ("bytes", {"PERDURE_WORKER_CACHE_BYTES": "5000"}),
    ],
)
def test_runs_dropped_from_a_full_cache_are_replayed_correctly(
    sticky_cluster: Cluster, client: Client, tmp_path: Path, bound: str, setting: dict[str, Any]
) -> None:
    queue = f"sticky-full-{bound}"
    keeper = worker(sticky_cluster, "keeper", queue, **setting)
    runs = {name: tmp_path / name for name in ("one", "two")}
    for name, ledger in runs.items():
        args = {"ledger": str(ledger), "turns": 4, "pad": 3000}
        client.start_workflow("chat", args, workflow_id=f"{queue}-{name}", task_queue=queue)
    for turn in range(4):  # the two runs' turns alternate: each drops the other
        for name, ledger in runs.items():
            converse(client, f"{queue}-{name}", ledger, range(turn, turn + 1))
    for name, ledger in runs.items():
        finished(client, f"{queue}-{name}", 4)
        assert all(marks(ledger)[f"step-{t}"] == 1 for t in range(4))
        assert marks(ledger)["start"] > 1  # replayed
    assert f"dropped from the cache (over its {bound} bound)" in keeper.output()
    keeper.kill()


def test_a_kept_run_goes_to_its_worker_on_another_scheduler_replica(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Two scheduler replicas, two workers: whichever replica a wake-up reaches, the run's next
    task goes to the worker that keeps it (its replica finds the task by polling, well within
    the sticky timeout), never to the other one."""
    cluster = start_cluster(replicas={"scheduler": 2}, PERDURE_STICKY_TIMEOUT="5")
    ledger, queue = tmp_path / "ledger", "sticky-replicas"
    workers = [worker(cluster, name, queue) for name in ("a", "b")]
    with cluster.client() as client:
        args = {"ledger": str(ledger), "turns": 6}
        client.start_workflow("chat", args, workflow_id="replicas-1", task_queue=queue)
        converse(client, "replicas-1", ledger, range(6))
        finished(client, "replicas-1", 6)

    ran = {name: by(ledger, name) for name in ("a", "b")}
    [(keeper, points)] = [(name, seen) for name, seen in ran.items() if seen]  # one worker
    assert points == ["start"] + [p for t in range(6) for p in (f"turn-{t}", f"step-{t}")]
    kept_by = workers[0] if keeper == "a" else workers[1]
    assert kept_by.output().count("resumed from the cache") >= 5
