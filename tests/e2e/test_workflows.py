"""A workflow started through the gateway runs on a real worker and is journaled by history."""

from __future__ import annotations

from pathlib import Path

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import Cluster
from tests.fixtures.ledger import ledger_lines


def test_five_step_workflow_completes_and_is_described(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start_worker("w1")
    ledger = tmp_path / "ledger"
    with cluster.client() as client:
        started = client.start_workflow("five_steps", {"ledger": str(ledger)}, workflow_id="five")
        assert started.started and started.workflow_id == "five"
        described = client.wait("five", timeout=60)
        events = list(client.history("five", page_size=2))  # several pages

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    result = from_payload(described.workflow.result)
    assert result["total"] == 150
    assert result["key"] == "five"
    assert [s.step_id for s in described.steps] == [f"step_{i}" for i in range(1, 6)]
    assert [from_payload(s.output) for s in described.steps] == [10, 20, 30, 40, 50]
    assert all(s.succeeded and s.fence == 1 for s in described.steps)

    assert [e.event_type for e in events] == [
        wf.EVENT_TYPE_WORKFLOW_STARTED,
        *[wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, wf.EVENT_TYPE_STEP_COMPLETED] * 5,
        wf.EVENT_TYPE_WORKFLOW_COMPLETED,
    ]
    assert [e.event_id for e in events] == list(range(1, 13))
    assert described.workflow.event_count == 12
    assert len(ledger_lines(ledger)) == 5


def test_repeated_step_names_get_occurrence_numbers(cluster: Cluster) -> None:
    cluster.start_worker("w1")
    with cluster.client() as client:
        client.start_workflow("loop_agent", {"turns": 3}, workflow_id="agent-1")
        described = client.wait("agent-1", timeout=60)
    assert [s.step_id for s in described.steps] == ["model", "model#2", "model#3"]
    keys = from_payload(described.workflow.result)
    assert keys == ["agent-1:model", "agent-1:model#2", "agent-1:model#3"]


def test_a_failing_step_is_journaled_and_fails_the_workflow(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.start_worker("w1")
    ledger = tmp_path / "ledger"
    with cluster.client() as client:
        client.start_workflow("fails", {"ledger": str(ledger)}, workflow_id="pay-1")
        described = client.wait("pay-1", timeout=60)
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert described.workflow.failure.type == "RuntimeError"
    assert "card declined" in described.workflow.failure.message
    charge, compensate = described.steps
    assert not charge.succeeded and charge.failure.type == "ValueError"
    assert compensate.succeeded
    assert [line.split()[0] for line in ledger_lines(ledger)] == ["compensate"]


def test_results_over_the_payload_limit_fail_instead_of_running_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    # History refuses them (RESOURCE_EXHAUSTED): the step fails at once, the workflow code
    # catches that; the run's own oversized result fails the run. Nothing runs twice.
    cluster.start_worker("w1")
    ledger = tmp_path / "ledger"
    with cluster.client() as client:
        client.start_workflow("oversized_result", {"ledger": str(ledger)}, workflow_id="big-1")
        described = client.wait("big-1", timeout=60)
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert described.workflow.failure.type == "JournalRejectedError"
    assert "PAYLOAD_TOO_LARGE" in described.workflow.failure.message
    oversized, after = described.steps
    assert not oversized.succeeded and oversized.failure.type == "JournalRejectedError"
    assert "the limit is 2097152 bytes" in oversized.failure.message
    assert after.succeeded
    assert [line.split()[0] for line in ledger_lines(ledger)] == ["oversized", "after"]


def test_recorded_values_are_journaled(cluster: Cluster) -> None:
    cluster.start_worker("w1")
    with cluster.client() as client:
        client.start_workflow("clock", None, workflow_id="clock-1")
        described = client.wait("clock-1", timeout=60)
        history = list(client.history("clock-1"))
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert list(described.steps) == []  # the SDK's own calls are history, not user steps
    now_step, uuid_step = [e for e in history if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    fields = from_payload(described.workflow.result)
    assert (now_step.step_id, uuid_step.step_id) == ("$now", "$uuid")
    assert fields["uuid"] == from_payload(uuid_step.payload)
    assert fields["now"].startswith(from_payload(now_step.payload)[:19])
