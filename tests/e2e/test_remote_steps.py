"""Remote steps (ctx.call, ctx.gather) served by other worker processes: journaled once,
retried durably, re-leased with a higher fence when their worker dies."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.ledger import ledger_entries, started_by
from tests.fixtures.runs import remote_outcomes, result_of

MODULE = "tests.e2e.remote_workflows"
WAIT = 90.0


def test_a_remote_step_runs_on_the_worker_serving_its_queue(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("runner", MODULE, task_queue="runs")
    cluster.start_worker("tools", MODULE, task_queue="tools")
    client = cluster.client()
    client.start_workflow(
        "calls_remote",
        {"step": "charge", "input": {"amount": 7, "ledger": str(ledger)}, "queue": "tools"},
        workflow_id="remote-1",
        task_queue="runs",
    )

    described = client.wait("remote-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
    assert result_of(described) == {"remote": {"charged": 7, "by": "python"}, "after": "done"}
    [execution] = ledger_entries(ledger)
    assert execution["identity"] == "tools"  # the tools worker, not the runner
    [outcome] = remote_outcomes(client, "remote-1")
    assert outcome.fence == 1 and outcome.step_name == "charge"
    # The workflow waited for the step holding no worker: suspended, then woken by its outcome.
    waits = [
        (e.wait.kind, e.wait.name)
        for e in client.history("remote-1")
        if e.event_type == wf.EVENT_TYPE_WORKFLOW_SUSPENDED
    ]
    assert waits == [(wf.WAIT_KIND_STEP, "charge")]
    steps = {step.step_id: step for step in described.steps}
    assert steps["charge"].status == wf.STEP_STATUS_COMPLETED
    assert steps["after"].position == steps["charge"].position + 1


def test_a_failing_remote_step_is_retried_on_the_durable_schedule(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("runner", MODULE, task_queue="runs")
    cluster.start_worker("tools", MODULE, task_queue="tools")
    client = cluster.client()
    step_input = {"fail_times": 2, "ledger": str(ledger)}
    client.start_workflow(
        "calls_remote",
        {"step": "flaky_py", "input": step_input, "queue": "tools"},
        workflow_id="flaky-1",
        task_queue="runs",
    )

    described = client.wait("flaky-1", timeout=WAIT)

    assert result_of(described)["remote"] == {"attempts": 3}
    events = list(client.history("flaky-1"))
    failed = [e for e in events if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED]
    assert [(e.attempt, e.failure.type) for e in failed] == [(1, "FlakyError"), (2, "FlakyError")]
    [outcome] = remote_outcomes(client, "flaky-1")
    # Each retry waited for its journaled due time, on the database clock.
    for attempt_failed, next_event in zip(failed, [*failed[1:], outcome], strict=True):
        assert next_event.event_time.ToDatetime() >= attempt_failed.due_time.ToDatetime()
    assert [line["attempt"] for line in ledger_entries(ledger)] == [1, 2, 3]
    # Every attempt went through a fresh step task, hence a higher fence.
    assert [e.fence for e in [*failed, outcome]] == [1, 2, 3]


def test_a_remote_step_that_runs_out_of_attempts_fails_where_it_is_awaited(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.start_worker("both", MODULE, task_queue="both")
    client = cluster.client()
    client.start_workflow(
        "calls_remote",
        {"step": "flaky_py", "input": {"fail_times": 99}, "queue": "both"},
        workflow_id="flaky-forever",
        task_queue="both",
    )

    described = client.wait("flaky-forever", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert described.workflow.failure.type == "StepFailedError"
    assert "FlakyError" in described.workflow.failure.message
    [outcome] = remote_outcomes(client, "flaky-forever")
    assert (outcome.event_type, outcome.attempt) == (wf.EVENT_TYPE_STEP_FAILED, 5)


def test_remote_steps_have_timeouts_and_heartbeats_like_local_ones(cluster: Cluster) -> None:
    cluster.start_worker("runner", MODULE, task_queue="runs")
    cluster.start_worker("tools", MODULE, task_queue="tools")
    client = cluster.client()
    client.start_workflow(
        "calls_remote",
        {"step": "square", "input": {"n": 3, "delay_ms": 5000}, "queue": "tools", "timeout": 0.3},
        workflow_id="too-slow",
        task_queue="runs",
    )
    client.start_workflow(
        "calls_remote",
        {"step": "resumable", "input": {}, "queue": "tools"},
        workflow_id="resumed",
        task_queue="runs",
    )

    too_slow = client.wait("too-slow", timeout=WAIT)
    resumed = client.wait("resumed", timeout=WAIT)

    # Each attempt was cut at its timeout, and the failure reached the awaiting workflow.
    assert too_slow.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert "StepTimeoutError" in too_slow.workflow.failure.message
    [outcome] = remote_outcomes(client, "too-slow")
    assert (outcome.failure.type, outcome.attempt) == ("StepTimeoutError", 5)
    # The second attempt found the progress the first one reported.
    assert result_of(resumed)["remote"] == {"done": 41}


def test_fan_out_of_20_remote_steps_survives_a_killed_worker(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # The killed worker's leases go over once they expire (no goodbye: its steps might run on).
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger = tmp_path / "ledger"
    cluster.start_worker("runner", MODULE, task_queue="runs")
    doomed = cluster.start_worker("tools-1", MODULE, concurrency=3, task_queue="tools")
    cluster.start_worker("tools-2", MODULE, concurrency=3, task_queue="tools")
    client = cluster.client()
    # tools-1 never finishes a step: the three it takes are in flight when it is killed.
    step_input = {"delay_ms": 100, "ledger": str(ledger), "stall_on": "tools-1"}
    client.start_workflow(
        "fans_out",
        {"n": 20, "queue": "tools", "step_input": step_input},
        workflow_id="fan-1",
        task_queue="runs",
    )
    wait_until(lambda: len(started_by(ledger, "tools-1")) == 3, WAIT, "tools-1 to take 3 steps")
    doomed.kill()

    described = client.wait("fan-1", timeout=WAIT)

    assert result_of(described) == [n * n for n in range(20)]
    outcomes = remote_outcomes(client, "fan-1")
    recorded = Counter(e.step_id for e in outcomes)
    assert len(recorded) == 20 and set(recorded.values()) == {1}, recorded
    assert all(e.event_type == wf.EVENT_TYPE_STEP_COMPLETED for e in outcomes)
    # The killed worker's attempts counted: the next lease of each (fence 2) recorded it lost,
    # and the retry (fence 3) ran elsewhere.
    stalled = started_by(ledger, "tools-1")
    assert {e.step_id for e in outcomes if e.fence == 3} == stalled
    lost = [
        e for e in events_of(client, "fan-1") if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED
    ]
    assert {(e.step_id, e.fence, e.failure.type) for e in lost} == {
        (step_id, 2, "WorkerLostError") for step_id in stalled
    }
    assert started_by(ledger, "tools-2") == set(recorded)
    # The calls were journaled in call order: square, square#2, ... square#20.
    events = list(client.history("fan-1"))
    scheduled = [e for e in events if e.event_type == wf.EVENT_TYPE_STEP_SCHEDULED]
    assert [e.step_id for e in scheduled] == ["square"] + [f"square#{n}" for n in range(2, 21)]
    assert [e.position for e in scheduled] == list(range(20))


def events_of(client: Client, workflow_id: str) -> list[wf.HistoryEvent]:
    """The run's whole journal."""
    return list(client.history(workflow_id))


@pytest.mark.parametrize("language", ["python", "node"])
def test_a_paused_remote_worker_is_fenced_out_and_its_late_result_refused(
    start_cluster: Callable[..., Cluster], tmp_path: Path, language: str
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cluster.start_worker("runner", MODULE, task_queue="runs")

    def start_tools(identity: str) -> Process:
        if language == "node":
            return cluster.start_node_worker(identity, "tools", ledger)
        return cluster.start_worker(identity, MODULE, task_queue="tools")

    step = {"python": "gated_py", "node": "gated"}[language]
    stalled = start_tools("tools-1")
    client = cluster.client()
    step_input = {"gate": str(gate), "ledger": str(ledger)}
    client.start_workflow(
        "calls_remote",
        {"step": step, "input": step_input, "queue": "tools"},
        workflow_id="fenced-1",
        task_queue="runs",
    )
    wait_until(lambda: ledger_entries(ledger), WAIT, "the step to start on the first worker")
    stalled.signal(signal.SIGSTOP)  # alive to the kernel, silent to the scheduler
    start_tools("tools-2")
    wait_until(lambda: len(ledger_entries(ledger)) == 2, WAIT, "the step task to be re-leased")
    gate.touch()
    described = client.wait("fenced-1", timeout=WAIT)
    stalled.signal(signal.SIGCONT)  # it finishes its attempt and reports, too late

    wait_until(
        lambda: f"refused a write with stale fence 1 to step {step} " in history_logs(cluster),
        WAIT,
        "history to refuse the paused worker's late result",
    )
    assert result_of(described)["remote"] == {"by": "tools-2"}
    assert [line["identity"] for line in ledger_entries(ledger)] == ["tools-1", "tools-2"]
    # The paused attempt counts: the next lease (fence 2) recorded it lost, the retry ran
    # under fence 3.
    [outcome] = remote_outcomes(client, "fenced-1")
    assert outcome.fence == 3


def history_logs(cluster: Cluster) -> str:
    """Everything the cluster's history processes logged."""
    return "".join(p.output() for p in cluster.processes if p.name == "history")
