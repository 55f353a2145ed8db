"""Remote steps (ctx.call, ctx.gather) served by other worker processes: journaled once,
retried durably, re-leased with a higher fence when their worker dies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.worker._payload import from_value
from tests.fixtures.cluster import Cluster

MODULE = "tests.e2e.remote_workflows"
WAIT = 90.0


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    """Every step execution the ledger holds."""
    return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []


def result_of(described: api.DescribeWorkflowResponse) -> Any:
    """A completed run's result as JSON values."""
    return from_value(described.workflow.result)


def remote_outcomes(client: Client, workflow_id: str) -> list[wf.HistoryEvent]:
    """The journaled outcomes of the run's remote steps (they hold no position)."""
    events = list(client.history(workflow_id))
    scheduled = {e.step_id for e in events if e.event_type == wf.EVENT_TYPE_STEP_SCHEDULED}
    return [
        e
        for e in events
        if e.step_id in scheduled
        and e.event_type in (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_STEP_FAILED)
    ]


def test_a_remote_step_runs_on_the_worker_serving_its_queue(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("runner", MODULE, task_queue="runs")
    tools = cluster.start_worker("tools", MODULE, task_queue="tools")
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
    [execution] = ledger_lines(ledger)
    assert execution["pid"] == tools.popen.pid  # the tools worker, not the runner
    [outcome] = remote_outcomes(client, "remote-1")
    assert outcome.fence == 1 and outcome.step_name == "charge"
    steps = {step.step_id: step for step in described.steps}
    assert steps["charge"].status == wf.STEP_STATUS_COMPLETED
    assert steps["after"].position == steps["charge"].position + 1
