"""Journals of any size, end to end: a run whose journal is larger than a message completes on
a Python worker, and after that worker is killed mid-run another replays it through pages and
payload references to the identical result; with tiny pages and references, Python and Node.js
workers replay a run at every wake-up and finish identically; and GetWorkflowHistory shows a
journal larger than a message in pages that each fit one, its payloads inline."""

from __future__ import annotations

import hashlib
from pathlib import Path

import psycopg

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.telemetry.rpc import MAX_MESSAGE_BYTES
from perdure.worker._payload import from_payload
from tests.e2e.blocking import runs_per_step
from tests.e2e.paged_workflows import MIB, large_output, part
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.ledger import ledger_lines

MODULE = "tests.e2e.paged_workflows"
WAIT = 180.0  # upper bound of any wait for a run to get somewhere
PAGE_BYTES = 1024  # a page of a worker's load: a large output alone, or a few small events
EVENT_AT_LEAST = 256  # the bytes history reckons an event at, whatever its size
REF_BYTES = 64  # every output but the shortest is stored by content
SHARED_ENV = {
    "PERDURE_JOURNAL_PAGE_BYTES": str(PAGE_BYTES),
    "PERDURE_PAYLOAD_REF_BYTES": str(REF_BYTES),
    "PERDURE_LEASE_TTL": "2",
}
# 36 outputs of 2 MiB (less the JSON quotes' room): a 72 MiB journal, over the 64 MiB limit.
LARGE = {"count": 36, "size": 2 * MIB - 64, "hold": 30}
SMALL = {"count": 12, "size": 300}
MESSAGE = "go " * 200  # a signal's payload stored by content


def run_row(shared: Cluster, workflow_id: str) -> tuple[int, int, int]:
    """The run's history_bytes and event count, and how many of its events name a payload by
    reference."""
    with psycopg.connect(shared.dsn) as conn:
        row = conn.execute(
            "SELECT w.history_bytes, w.event_count, (SELECT count(*) FROM history.events e"
            " WHERE e.workflow_id = w.workflow_id AND e.payload_sha256 IS NOT NULL)"
            " FROM history.workflows w WHERE w.workflow_id = %s",
            [workflow_id],
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_a_run_larger_than_a_message_survives_its_worker_and_reads_in_pages(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    first = shared.start_worker("first", module=MODULE, task_queue="large")
    params = {**LARGE, "ledger": str(ledger), "gate": str(gate)}
    client.start_workflow("long_outputs", params, workflow_id="large", task_queue="large")
    wait_until(
        lambda: any(line.startswith("start held") for line in ledger_lines(ledger)),
        WAIT,
        "the run to reach its held step",
    )
    first.kill()  # SIGKILL, mid-run: no goodbye, its lease expires
    gate.touch()
    second = shared.start_worker("second", module=MODULE, task_queue="large")
    done = client.wait("large", timeout=WAIT)

    expected = hashlib.sha256()
    for index in range(LARGE["count"]):
        expected.update(large_output(index, LARGE["size"]).encode())
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.workflow.result) == expected.hexdigest()
    runs = runs_per_step(ledger)
    assert all(runs[f"output_{index}"] == 1 for index in range(LARGE["count"]))
    assert "Skipping completed step: output_29" in second.output()
    history_bytes, _, by_reference = run_row(shared, "large")
    assert history_bytes > MAX_MESSAGE_BYTES
    assert by_reference >= LARGE["count"]

    # The public history: every event, its payloads inline, in pages that each fit a message.
    sizes, outputs, token = [], 0, ""
    while True:
        page = client._stub.GetWorkflowHistory(
            api.GetWorkflowHistoryRequest(workflow_id="large", page_token=token), timeout=WAIT
        )
        sizes.append(page.ByteSize())
        for event in page.events:
            if event.event_type == wf.EVENT_TYPE_STEP_COMPLETED and event.step_id != "held":
                assert len(from_payload(event.payload)) == LARGE["size"]
                outputs += 1
        token = page.next_page_token
        if not token:
            break
    assert outputs == LARGE["count"]
    assert len(sizes) > 1 and max(sizes) < MAX_MESSAGE_BYTES


def expected_small() -> dict[str, object]:
    parts = [part(index, SMALL["size"]) for index in range(SMALL["count"])]
    return {
        "parts": [hashlib.sha256(text.encode()).hexdigest()[:12] for text in parts],
        "sizes": [len(text) for text in parts],
        "message": MESSAGE,
    }


def finish_paged_replay(shared: Cluster, client: Client, workflow_id: str, queue: str) -> object:
    client.start_workflow("paged_replay", SMALL, workflow_id=workflow_id, task_queue=queue)
    wait_until(
        lambda: client.describe(workflow_id).workflow.status == wf.WORKFLOW_STATUS_WAITING,
        WAIT,
        f"{workflow_id} to wait for its signal",
    )
    client.signal(workflow_id, "go", MESSAGE)
    done = client.wait(workflow_id, timeout=WAIT)
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    _, events, by_reference = run_row(shared, workflow_id)
    assert events // (PAGE_BYTES // EVENT_AT_LEAST) >= 6  # each wake-up loaded many pages
    assert by_reference >= SMALL["count"] // 2 + 1  # the long outputs and the signal
    return from_payload(done.workflow.result)


def test_python_and_node_workers_replay_through_pages_and_references_alike(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    # Without a cache of suspended runs, so that each wake-up is a replay through the pages.
    worker = shared.start_worker(
        "py-paged", module=MODULE, task_queue="py-paged", PERDURE_WORKER_CACHE_SIZE="0"
    )
    python = finish_paged_replay(shared, client, "paged-python", "py-paged")
    assert "Skipping completed step: part_11" in worker.output()  # replayed after its signal

    ledger = tmp_path / "node-ledger"
    shared.start_node_worker("node-paged", "node-paged", ledger, PERDURE_WORKER_CACHE_SIZE="0")
    node = finish_paged_replay(shared, client, "paged-node", "node-paged")

    assert python == node == expected_small()
