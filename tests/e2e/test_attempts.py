"""Every attempt counts, and time limits hold: attempts journaled as they start, lost attempts
failed with WorkerLostError, heartbeat and execution timeouts, and runs whose own code kills
their worker parked. Real services and workers (Python and Node.js) on a real PostgreSQL.

One cluster for the module (leases of 2 s, a run parked after 2 losses in a row); tests whose
workers die run them on task queues of their own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf import duration_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from tests.fixtures.cluster import Cluster, Process
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.attempt_workflows"
WAIT = 90.0  # upper bound of any wait for a run to end
CRASH_LOOP_LIMIT = 2
SHARED_ENV = {"PERDURE_LEASE_TTL": "2", "PERDURE_CRASH_LOOP_LIMIT": str(CRASH_LOOP_LIMIT)}
ROUNDING = timedelta(milliseconds=1)  # timestamps travel as nanoseconds, stored as microseconds


def attempts(client: Client, workflow_id: str, step_id: str) -> list[tuple[str, int, str]]:
    """A step's attempts and outcome as journaled: (event, attempt, failure type)."""
    return [
        (wf.EventType.Name(e.event_type).removeprefix("EVENT_TYPE_"), e.attempt, e.failure.type)
        for e in client.history(workflow_id)
        if e.step_id == step_id
    ]


def until_closed(
    client: Client, workflow_id: str, restart: Callable[[], Process | None]
) -> api.DescribeWorkflowResponse:
    """Wait for the run to close, calling `restart` (which starts a worker again if it died)
    in between."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        described = client.describe(workflow_id)
        if described.workflow.status not in (
            wf.WORKFLOW_STATUS_RUNNING,
            wf.WORKFLOW_STATUS_WAITING,
        ):
            return described
        restart()
        time.sleep(0.1)
    raise AssertionError(f"{workflow_id} still open after {WAIT}s")


def keep_alive(start: Callable[[], Process]) -> Callable[[], Process | None]:
    """A `restart` for until_closed: a worker started now, and again whenever it has died."""
    current = [start()]

    def restart() -> Process | None:
        if current[0].popen.poll() is not None:
            current.append(start())
        return current[-1]

    return restart


# -- heartbeat timeout -------------------------------------------------------------------------


def test_a_step_that_stops_heartbeating_fails_and_is_retried(client: Client) -> None:
    client.start_workflow("heartbeat_limits", workflow_id="beats-1")
    described = client.wait("beats-1", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    # Heartbeats every 0.1 s keep a 1.5 s attempt alive under a 0.5 s heartbeat timeout.
    assert attempts(client, "beats-1", "steady") == [
        ("STEP_ATTEMPT_STARTED", 1, ""),
        ("STEP_COMPLETED", 1, ""),
    ]
    assert attempts(client, "beats-1", "silent") == [
        ("STEP_ATTEMPT_STARTED", 1, ""),
        ("STEP_ATTEMPT_FAILED", 1, "StepHeartbeatTimeoutError"),
        ("STEP_ATTEMPT_STARTED", 2, ""),
        ("STEP_COMPLETED", 2, ""),
    ]


# -- execution timeout ---------------------------------------------------------------------------


def test_a_run_past_its_execution_timeout_fails_with_no_worker_holding_it(
    shared: Cluster, client: Client
) -> None:
    started = time.monotonic()
    client.start_workflow("waits_for_go", workflow_id="deadline-1", execution_timeout=1.5)
    client.start_workflow("waits_for_go", workflow_id="deadline-2", execution_timeout=60)
    client.signal_with_start("waits_for_go", "deadline-3", "other", execution_timeout=1.5)
    cli = [sys.executable, "-m", "perdure.cli", "workflow", "--address", shared.gateway]
    cli += ["start", "waits_for_go", "--id", "deadline-4", "--execution-timeout", "1.5"]
    subprocess.run(cli, check=True, capture_output=True, timeout=60)
    described = client.wait("deadline-1", timeout=WAIT)
    assert time.monotonic() - started >= 1.5
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert described.workflow.failure.type == "ExecutionTimeout"
    assert "execution timeout of 1.5s" in described.workflow.failure.message
    events = list(client.history("deadline-1"))
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_FAILED
    assert events[-1].fence == 0  # history's own write: no lease needed
    for other in ("deadline-3", "deadline-4"):  # by signal-with-start, by the CLI
        failed = client.wait(other, timeout=WAIT).workflow
        assert (failed.status, failed.failure.type) == (
            wf.WORKFLOW_STATUS_FAILED,
            "ExecutionTimeout",
        )
    # A run within its timeout is untouched.
    client.signal("deadline-2", "go", "now")
    assert client.wait("deadline-2", timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED


@pytest.mark.parametrize("seconds", [0, -1, 11 * 365 * 24 * 3600])
def test_an_execution_timeout_out_of_range_is_refused(client: Client, seconds: int) -> None:
    request = api.StartWorkflowRequest(
        workflow_type="waits_for_go",
        workflow_id=f"deadline-bad-{seconds}",
        execution_timeout=duration_pb2.Duration(seconds=seconds),
    )
    with pytest.raises(grpc.RpcError) as refused:
        client._stub.StartWorkflow(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "execution_timeout must be more than 0" in str(refused.value.details())
    assert error_reason(refused.value) != "WORKFLOW_ID_CONFLICT"


# -- workflow code that kills its worker -------------------------------------------------------


def test_a_run_whose_code_kills_its_worker_is_parked(shared: Cluster, client: Client) -> None:
    restart = keep_alive(lambda: shared.start_worker("crashy", module=MODULE, task_queue="crashy"))
    client.start_workflow("crashes_its_worker", workflow_id="loop-1", task_queue="crashy")
    described = until_closed(client, "loop-1", restart)
    assert described.workflow.status == wf.WORKFLOW_STATUS_PARKED
    assert described.workflow.failure.type == "WorkerCrashLoop"
    assert f"lost its worker {CRASH_LOOP_LIMIT} times in a row" in (
        described.workflow.failure.message
    )
    worker = restart()
    assert worker is not None
    worker.kill()


# -- Node.js: attempts of a step that kills its worker, and a heartbeat timeout ----------------


def test_node_remote_step_that_kills_its_worker_fails_after_its_attempts(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    restart = keep_alive(lambda: shared.start_node_worker("node-crash", "node-crash", ledger))
    client.start_workflow("calls_crashing_step", "node-crash", workflow_id="node-loop-1")
    described = until_closed(client, "node-loop-1", restart)
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert "WorkerLostError" in described.workflow.failure.message
    assert attempts(client, "node-loop-1", "crash") == [
        ("STEP_SCHEDULED", 0, ""),
        ("STEP_ATTEMPT_STARTED", 1, ""),
        ("STEP_ATTEMPT_FAILED", 1, "WorkerLostError"),
        ("STEP_ATTEMPT_STARTED", 2, ""),
        ("STEP_FAILED", 2, "WorkerLostError"),
    ]
    # The backoff: attempt 2 started no earlier than the retry time of the lost attempt 1.
    events = [e for e in client.history("node-loop-1") if e.step_id == "crash"]
    retry_at = events[2].due_time.ToDatetime()
    assert events[3].event_time.ToDatetime() >= retry_at - ROUNDING
    worker = restart()
    assert worker is not None
    worker.kill()


def test_node_step_over_its_heartbeat_timeout_is_aborted_and_retried(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    worker = shared.start_node_worker("node-beats", "node-beats", tmp_path / "ledger")
    try:
        client.start_workflow("node_limits", workflow_id="node-beats-1", task_queue="node-beats")
        described = client.wait("node-beats-1", timeout=WAIT)
        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        assert attempts(client, "node-beats-1", "silent") == [
            ("STEP_ATTEMPT_STARTED", 1, ""),
            ("STEP_ATTEMPT_FAILED", 1, "StepHeartbeatTimeoutError"),
            ("STEP_ATTEMPT_STARTED", 2, ""),
            ("STEP_COMPLETED", 2, ""),
        ]
        assert "aborted: StepHeartbeatTimeoutError" in worker.output()
    finally:
        worker.kill()
