"""One executor per lease, end to end: a worker ends on SIGTERM within its grace whatever its
steps do, and a Node.js worker cut off from every scheduler stops its step body before its
lease can expire (the Python worker's stream breaks are the chaos suite's, tests/chaos)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker.__main__ import EXIT_MARGIN_SECONDS
from perdure.worker._worker import CLOSE_SECONDS
from tests.fixtures.cluster import Cluster, wait_until

WAIT = 60.0
GRACE = 1.0


def test_sigterm_ends_a_worker_with_a_hung_sync_step_within_its_grace(
    cluster: Cluster, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    worker = cluster.start_worker("hung", module="tests.e2e.lease_workflows", shutdown_grace=GRACE)
    with cluster.client() as client:
        client.start_workflow("hangs_in_sync_step", str(started), workflow_id="hung-1")
        wait_until(started.exists, WAIT, "the hanging step to start")
    began = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.popen.wait(timeout=WAIT)
    took = time.monotonic() - began

    assert code == 0
    # The drain's grace, the stream's close, then the exit that does not wait for the thread.
    assert took < GRACE + CLOSE_SECONDS + EXIT_MARGIN_SECONDS, took
    assert "exiting although user code still runs" in worker.output()


def _bodies(ledger: Path) -> list[dict[str, Any]]:
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return [entry for entry in map(json.loads, lines) if entry["kind"] == "body"]


def test_a_node_worker_with_no_scheduler_stops_its_step_before_the_lease_expires(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger = tmp_path / "ledger"
    worker = cluster.start_node_worker("n1", "default", ledger)
    with cluster.client() as client:
        client.start_workflow("node_long", {"ms": 6000}, workflow_id="node-long-1")
        wait_until(lambda: _bodies(ledger), WAIT, "the step body to start")
        scheduler = next(p for p in reversed(cluster.processes) if p.name == "scheduler")
        scheduler.kill()  # no renewal gets through: the worker must fence itself
        wait_until(
            lambda: any(b["event"] == "aborted" for b in _bodies(ledger)),
            WAIT,
            "the worker to stop the body",
        )
        time.sleep(2.5)  # past the lease's expiry: the next grant takes over with fence 2
        cluster.start_service("scheduler")
        described = client.wait("node-long-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    events = [(b["event"], b["fence"]) for b in _bodies(ledger)]
    assert events == [("start", 1), ("aborted", 1), ("start", 2), ("returned", 2)], events
    assert "could not be renewed before its deadline" in worker.output()
