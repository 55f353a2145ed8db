"""Steps that stream, in both SDKs (current_step().emit / info.emit), read as a client reads
them: ReadStream through the gateway. Every chunk arrives once, in order, numbered 1..N; a
failed attempt's frames are followed by its reset before the next attempt's; remote steps
stream under their step task's lease."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from tests.e2e.stream_workflows import tokens
from tests.fixtures.cluster import Cluster, Process
from tests.fixtures.frames import read_frames, rendered, seqs_are_gapless, stream_reader
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.stream_workflows"
WAIT = 60.0
NODE_QUEUE = "node-streams"
SDKS = ("python", "node")
# The workflow with one streaming local step, and the remote step type, of each SDK.
LOCAL = {"python": "streams_text", "node": "node_streams"}
REMOTE = {"python": ("write_remote", "default"), "node": ("node_write", NODE_QUEUE)}


@pytest.fixture(scope="module")
def node_worker(shared: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    ledger = tmp_path_factory.mktemp("node-streams") / "ledger"
    yield shared.start_node_worker("node-streams", NODE_QUEUE, ledger)


def start(client: Client, sdk: str, workflow_type: str, workflow_id: str, input: object) -> None:
    queue = NODE_QUEUE if sdk == "node" and workflow_type == LOCAL["node"] else "default"
    client.start_workflow(workflow_type, input, workflow_id=workflow_id, task_queue=queue)


def stream_of(shared: Cluster, workflow_id: str) -> list[wf.StreamFrame]:
    """The run's "output" frames, read live from the start until the run is closed."""
    with stream_reader(shared.gateway) as stub:
        return read_frames(stub, workflow_id, timeout=WAIT)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_steps_500_chunks_reach_a_reader_once_each_in_order(
    shared: Cluster, client: Client, node_worker: Process, sdk: str
) -> None:
    workflow_id = f"five-hundred-{sdk}"
    start(client, sdk, LOCAL[sdk], workflow_id, {"n": 500})

    frames = stream_of(shared, workflow_id)
    described = client.wait(workflow_id, timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert seqs_are_gapless(frames) and len(frames) == 500
    assert {(f.kind, f.step_id, f.attempt) for f in frames} == {(wf.FRAME_KIND_DATA, "write", 1)}
    assert rendered(frames) == "".join(tokens(1, 500)) == result_of(described)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_failed_attempts_frames_are_reset_before_the_next_attempts(
    shared: Cluster, client: Client, node_worker: Process, sdk: str
) -> None:
    workflow_id = f"retried-{sdk}"
    start(client, sdk, LOCAL[sdk], workflow_id, {"n": 40, "fail_attempts": 1})

    frames = stream_of(shared, workflow_id)
    described = client.wait(workflow_id, timeout=WAIT)

    assert seqs_are_gapless(frames) and len(frames) == 81
    shape = [(f.kind, f.step_id, f.attempt) for f in frames]
    data = wf.FRAME_KIND_DATA
    assert (
        shape
        == [(data, "write", 1)] * 40
        + [(wf.FRAME_KIND_RESET, "write", 1)]
        + [(data, "write", 2)] * 40
    )
    assert rendered(frames[:40]) == "".join(tokens(1, 40))  # what a reader saw before the reset
    assert rendered(frames) == "".join(tokens(2, 40)) == result_of(described)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_remote_step_streams_under_its_step_task_lease(
    shared: Cluster, client: Client, node_worker: Process, sdk: str
) -> None:
    step, queue = REMOTE[sdk]
    workflow_id = f"remote-stream-{sdk}"
    input = {"step": step, "queue": queue, "n": 30, "fail_attempts": 1}
    start(client, "python", "streams_remote", workflow_id, input)

    frames = stream_of(shared, workflow_id)
    described = client.wait(workflow_id, timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert seqs_are_gapless(frames) and len(frames) == 61
    assert [(f.kind, f.attempt) for f in frames if f.step_id == step] == [
        (wf.FRAME_KIND_DATA, 1)
    ] * 30 + [(wf.FRAME_KIND_RESET, 1)] + [(wf.FRAME_KIND_DATA, 2)] * 30
    assert rendered(frames) == "".join(tokens(2, 30)) == result_of(described)


def test_what_an_emit_asks_of_its_step_reads_only_the_steps_own_events(
    shared: Cluster, client: Client
) -> None:
    """An emit checks what became of its step's attempts (history.emit_state). In a run of
    any length that must read the step's own few events, not every event of the run: here a
    streamed run's journal gets 20,000 more events (in a transaction rolled back after), and the
    check, as PostgreSQL executes it, reads a handful of rows."""
    start(client, "python", LOCAL["python"], "long-journal", {"n": 3})
    client.wait("long-journal", timeout=WAIT)
    with psycopg.connect(shared.dsn) as conn:  # one transaction, rolled back
        [(key, run_id)] = conn.execute(
            "SELECT workflow_id, run_id FROM history.workflows WHERE workflow_id LIKE %s",
            ["%long-journal"],
        ).fetchall()
        conn.execute(
            """INSERT INTO history.events
                   (workflow_id, event_id, event_type, fence, step_id, step_name, position,
                    attempt, part)
               SELECT %s, 1000 + g, CASE WHEN g %% 2 = 0 THEN 'STEP_ATTEMPT_STARTED'
                                         ELSE 'STEP_COMPLETED' END,
                      1, 'filler#' || (g / 2), 'filler',
                      CASE WHEN g %% 2 = 1 THEN 1000 + g END, 1,
                      (SELECT part FROM history.workflows WHERE workflow_id = %s)
               FROM generate_series(0, 19999) g""",
            [key, key],
        )
        conn.execute("ANALYZE history.events")
        [(plan,)] = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM history.emit_state(%s, %s, %s, %s, %s)",
            [run_id, key, "write", 1, "output"],
        )
        conn.rollback()
    read = rows_read(plan[0]["Plan"], "events_")  # its partitions (events_<part>)
    assert read <= 10, f"the check read {read} rows of the run's 20,000+ events: {plan}"


def rows_read(node: dict[str, Any], relation: str) -> int:
    """The rows the plan's scans of the relations named `relation`... went through: returned,
    or filtered out."""
    own = 0
    if str(node.get("Relation Name", "")).startswith(relation):
        loops = node.get("Actual Loops", 1)
        removed = node.get("Rows Removed by Filter", 0) + node.get(
            "Rows Removed by Index Recheck", 0
        )
        own = (node.get("Actual Rows", 0) + removed) * loops
    return own + sum(rows_read(child, relation) for child in node.get("Plans", ()))
