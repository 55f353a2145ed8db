"""Workers that drift from their journal and from the database, in both SDKs: code changed on
a cancellation path parks its run, and ctx.now() is the database's clock, not the worker's
(which runs an hour ahead here)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.e2e.drifting_workflows import CLOCK_AHEAD
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.postgres import Databases

WAIT = 60.0
SDKS = ("python", "node")  # each worker serves the task queue of its SDK's name


@pytest.fixture(scope="module")
def drifting(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster, a Python and a Node.js worker whose wall clocks run an hour ahead."""
    workdir: Path = tmp_path_factory.mktemp("drift")
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, workdir)
        try:
            cluster.start_services()
            # Its code "changes" in the live process (a file it reads): no cache of suspended
            # runs, so that every wake-up replays and meets the change, as a new deploy would.
            cluster.start_worker(
                "py",
                module="tests.e2e.drifting_workflows",
                task_queue="python",
                PERDURE_WORKER_CACHE_SIZE="0",
            )
            ahead_ms = str(int(CLOCK_AHEAD.total_seconds() * 1000))
            cluster.start_node_worker("node", "node", workdir / "ledger", CLOCK_AHEAD_MS=ahead_ms)
            yield cluster
        finally:
            cluster.stop()


def wait_for_signal(client: Client, workflow_id: str, name: str) -> None:
    def waiting() -> bool:
        info = client.describe(workflow_id).workflow
        return info.status == wf.WORKFLOW_STATUS_WAITING and info.wait.name == name

    wait_until(waiting, WAIT, f"{workflow_id} to wait for signal {name!r}")


@pytest.mark.parametrize("sdk", SDKS)
def test_code_changed_on_the_cancellation_path_parks(
    drifting: Cluster, tmp_path: Path, sdk: str
) -> None:
    version = tmp_path / "version"
    version.write_text("compensates")
    run = f"cancel-path-{sdk}"
    with drifting.client() as client:
        client.start_workflow(
            "cancel_path_switch",
            {"version_file": str(version)},
            workflow_id=run,
            task_queue=sdk,
        )
        wait_for_signal(client, run, "go")
        client.cancel(run, "changed my mind")
        wait_for_signal(client, run, "finish")  # compensated, and waits
        version.write_text("plain")  # the new code re-raises at once, compensating nothing
        client.signal(run, "finish")
        described = client.wait(run, timeout=WAIT)

    # Not CANCELLED: the journal holds a compensation the code no longer makes.
    assert described.workflow.status == wf.WORKFLOW_STATUS_PARKED
    failure = described.workflow.failure
    assert failure.type == "NonDeterminismError"
    assert "recorded step(s) release" in failure.message
    assert [s.step_id for s in described.steps if not s.step_id.startswith("$")] == ["release"]


@pytest.mark.parametrize("sdk", SDKS)
def test_now_is_the_database_clock_not_the_workers(drifting: Cluster, sdk: str) -> None:
    run = f"clock-{sdk}"
    with drifting.client() as client:
        client.start_workflow("clock_reading", workflow_id=run, task_queue=sdk)
        described = client.wait(run, timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    now = datetime.fromisoformat(from_payload(described.workflow.result))
    started = described.workflow.create_time.ToDatetime(tzinfo=UTC)
    closed = described.workflow.close_time.ToDatetime(tzinfo=UTC)
    # Between the start and the close by the database's clock (Node.js keeps milliseconds);
    # the worker's own clock is an hour ahead.
    assert started - timedelta(milliseconds=1) <= now <= closed
