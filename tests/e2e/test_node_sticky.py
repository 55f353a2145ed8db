"""Sticky execution in the Node.js SDK: a Node worker keeps a waiting run and resumes it at
each wake-up instead of replaying its code from the first line, the scheduler offering the
run's tasks to it rather than to the other worker on the queue; a worker killed mid-run leaves
nothing behind that matters: the other replays the run from its journal and finishes it with
the same result (skipped, with a message, where Node.js is not installed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from perdure.api.workflow.v1 import workflow_pb2 as wf
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.ledger import ledger_entries
from tests.fixtures.runs import result_of

WAIT = 60.0
TURNS = 20
KILLED_AFTER = 10  # turns the worker keeping the run serves before it is killed


def passes(path: Path) -> list[str]:
    """The points the workflow code passed, in order, as `<worker> <point>`."""
    return path.read_text().splitlines() if path.exists() else []


def test_node_workers_resume_a_kept_run_at_each_signal_and_another_replays_it_after_sigkill(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, seen = tmp_path / "ledger", tmp_path / "passes"
    # Two workers on the queue: the scheduler offers each wake-up to the one keeping the run.
    workers = {
        name: cluster.start_node_worker(name, "chat", ledger) for name in ("node-1", "node-2")
    }
    client = cluster.client()
    client.start_workflow(
        "node_chat",
        {"turns": TURNS, "passes": str(seen)},
        workflow_id="chat-1",
        task_queue="chat",
    )
    wait_until(lambda: passes(seen), WAIT, "the run to start")
    keeper = passes(seen)[0].split()[0]
    (survivor,) = set(workers) - {keeper}

    def say(turn: int) -> None:
        # One signal per workflow task: the next is sent once the code has taken this one.
        client.signal("chat-1", "say", f"hello {turn}", signal_id=f"say-{turn}")
        taken = f" turn {turn}"
        wait_until(lambda: any(p.endswith(taken) for p in passes(seen)), WAIT, f"turn {turn}")

    for turn in range(KILLED_AFTER):
        say(turn)
    # Each wake-up went to the worker keeping the run and resumed it: every point ran once.
    assert passes(seen) == [f"{keeper} start"] + [f"{keeper} turn {t}" for t in range(KILLED_AFTER)]

    # The last turn's reply is recorded too (its pass line comes before the step runs).
    wait_until(
        lambda: sum(s.succeeded for s in client.describe("chat-1").steps) == KILLED_AFTER,
        WAIT,
        "the replies before the kill to be recorded",
    )
    workers[keeper].kill()  # SIGKILL between two turns: its kept run is gone with it
    for turn in range(KILLED_AFTER, TURNS):
        say(turn)
    described = client.wait("chat-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
    assert result_of(described) == [f"{t}: hello {t}" for t in range(TURNS)]
    # The other worker replayed the run once, from its journal, and then kept it in turn.
    assert passes(seen)[KILLED_AFTER + 1 :] == (
        [f"{survivor} start"]
        + [f"{survivor} turn {t}" for t in range(KILLED_AFTER)]  # the replay
        + [f"{survivor} turn {t}" for t in range(KILLED_AFTER, TURNS)]  # resumed, once each
    )
    # No step ran twice: the replay took the first turns' replies from the journal.
    replies = Counter((line["step_id"], line["identity"]) for line in ledger_entries(ledger))
    assert len(replies) == TURNS and set(replies.values()) == {1}
    assert Counter(identity for _, identity in replies) == {
        keeper: KILLED_AFTER,
        survivor: TURNS - KILLED_AFTER,
    }
