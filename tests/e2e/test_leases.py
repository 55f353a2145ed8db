"""One executor per lease, end to end: a worker ends on SIGTERM within its grace whatever its
steps do, and a Node.js worker cut off from every scheduler stops its step body before its
lease can expire (the Python worker's stream breaks are the chaos suite's, tests/chaos)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker.__main__ import EXIT_MARGIN_SECONDS
from perdure.worker._worker import CLOSE_SECONDS
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.ledger import ledger_entries
from tests.fixtures.worker_streams import connect, hello, task_row

WAIT = 60.0
GRACE = 1.0
QUEUE = "leases"


def test_a_broken_stream_keeps_its_lease_and_only_a_goodbye_releases_it(cluster: Cluster) -> None:
    cluster.start_worker("registrar", task_queue=QUEUE).kill()  # its types stay registered
    scheduler = next(p for p in cluster.processes if p.name == "scheduler")
    with grpc.insecure_channel(cluster.address("scheduler")) as channel, cluster.client() as client:
        client.start_workflow("blocks_in_third", {}, workflow_id="held-1", task_queue=QUEUE)
        first = connect(channel, hello(QUEUE))
        granted = first.receive().task
        first.close()  # the stream breaks: no goodbye
        wait_until(
            lambda: "its 1 lease(s) stand until they expire" in scheduler.output(),
            WAIT,
            "the scheduler to see the stream break",
        )
        fence, owner, _, run_at = task_row(cluster, "held-1")
        assert (fence, run_at) == (granted.fence, None) and owner is not None  # it stands

        # Renewed off the stream, by the same key (none here), whatever became of the stream.
        lease = tpb.LeaseRef(workflow_id="held-1", fence=granted.fence)
        renewed = tgrpc.TaskServiceStub(channel).RenewLeases(
            tpb.RenewLeasesRequest(leases=[lease]), timeout=10
        )
        [renewal] = renewed.renewed
        assert renewal.lease == lease
        assert renewal.expire_time.ToNanoseconds() > renewed.now.ToNanoseconds()

        # The worker's next hello takes it over; its goodbye (a half-close) releases it at once.
        second = connect(channel, hello(QUEUE, lease))
        second.send(None)
        wait_until(
            lambda: task_row(cluster, "held-1")[1] is None, WAIT, "the goodbye to release the lease"
        )
        assert task_row(cluster, "held-1")[3] is not None  # due again at once
        second.close()


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
    # The drain's grace, the stream's close, then the exit that does not wait for the thread
    # (a daemon thread of its own, or the exit timer's os._exit if anything else lingers).
    assert took < GRACE + CLOSE_SECONDS + EXIT_MARGIN_SECONDS, took
    assert "left to expire rather than released" in worker.output()  # no goodbye for it


def _bodies(ledger: Path) -> list[dict[str, Any]]:
    return [entry for entry in ledger_entries(ledger) if entry["kind"] == "body"]


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
        time.sleep(2.5)  # past the lease's expiry: a later grant takes over
        cluster.start_service("scheduler")
        described = client.wait("node-long-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    events = [(b["event"], b["fence"]) for b in _bodies(ledger)]
    # The next lease records the stopped attempt as lost; its retry runs under a later one.
    assert events[:2] == [("start", 1), ("aborted", 1)], events
    [(_, retry_fence)] = {(event, fence) for event, fence in events[2:] if event == "start"}
    assert events[2:] == [("start", retry_fence), ("returned", retry_fence)], events
    assert retry_fence > 1
    assert "could not be renewed before its deadline" in worker.output()


def test_sigterm_ends_a_node_worker_whose_step_ignores_its_signal_within_its_grace(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    worker = cluster.start_node_worker("n-hung", "default", ledger, shutdown_grace=GRACE)
    with cluster.client() as client:
        params = {"ms": 3_600_000, "ignore_signal": True}
        client.start_workflow("node_long", params, workflow_id="node-hung-1")
        wait_until(lambda: _bodies(ledger), WAIT, "the step body to start")
    began = time.monotonic()
    worker.signal(signal.SIGTERM)
    code = worker.popen.wait(timeout=WAIT)

    assert code == 0
    assert time.monotonic() - began < GRACE + CLOSE_SECONDS + EXIT_MARGIN_SECONDS
    assert "giving up 1 running task(s); their leases are left to expire" in worker.output()
