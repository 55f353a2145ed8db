"""Sticky execution in the Node.js SDK: a Node worker keeps a waiting run and resumes it at
each wake-up instead of replaying its code from the first line; a worker killed mid-run
leaves nothing behind that matters: another one replays the run from its journal and
finishes it with the same result (skipped, with a message, where Node.js is not installed)."""

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
KILLED_AFTER = 10  # turns the first worker serves before it is killed


def passes(path: Path) -> list[str]:
    """The points the workflow code passed, in order, as `<worker> <point>`."""
    return path.read_text().splitlines() if path.exists() else []


def test_a_node_worker_resumes_a_kept_run_at_each_signal_and_another_replays_it_after_sigkill(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, seen = tmp_path / "ledger", tmp_path / "passes"
    first = cluster.start_node_worker("node-1", "chat", ledger)
    client = cluster.client()
    client.start_workflow(
        "node_chat",
        {"turns": TURNS, "passes": str(seen)},
        workflow_id="chat-1",
        task_queue="chat",
    )

    def say(turn: int, worker: str) -> None:
        # One signal per workflow task: the next is sent once the code has taken this one.
        client.signal("chat-1", "say", f"hello {turn}", signal_id=f"say-{turn}")
        wait_until(lambda: f"{worker} turn {turn}" in passes(seen), WAIT, f"turn {turn}")

    for turn in range(KILLED_AFTER):
        say(turn, "node-1")
    # Each wake-up resumed the kept run: every point of the code ran once.
    assert passes(seen) == ["node-1 start"] + [f"node-1 turn {t}" for t in range(KILLED_AFTER)]

    first.kill()  # SIGKILL between two turns: its kept run is gone with it
    cluster.start_node_worker("node-2", "chat", ledger)
    for turn in range(KILLED_AFTER, TURNS):
        say(turn, "node-2")
    described = client.wait("chat-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
    assert result_of(described) == [f"{t}: hello {t}" for t in range(TURNS)]
    # The new worker replayed the run once, from its journal, and then kept it in turn.
    assert passes(seen)[KILLED_AFTER + 1 :] == (
        ["node-2 start"]
        + [f"node-2 turn {t}" for t in range(KILLED_AFTER)]  # the replay
        + [f"node-2 turn {t}" for t in range(KILLED_AFTER, TURNS)]  # resumed, once each
    )
    # No step ran twice: the replay took the first turns' replies from the journal.
    replies = Counter((line["step_id"], line["identity"]) for line in ledger_entries(ledger))
    assert len(replies) == TURNS and set(replies.values()) == {1}
    assert Counter(identity for _, identity in replies) == {
        "node-1": KILLED_AFTER,
        "node-2": TURNS - KILLED_AFTER,
    }
