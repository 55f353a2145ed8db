"""Workers in two languages on one platform: a Node.js workflow driven through the gateway
like any other, Python workflows calling steps that Node.js workers execute and the reverse,
with the same guarantees (skipped, with a message, where Node.js is not installed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from perdure.api.workflow.v1 import workflow_pb2 as wf
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.ledger import ledger_entries, started_by
from tests.fixtures.runs import remote_outcomes, result_of

MODULE = "tests.e2e.remote_workflows"  # the Python side of the remote-step tests
WAIT = 90.0


def kinds(ledger: Path) -> Counter[str]:
    """How many times each step ran, by kind."""
    return Counter(line["kind"] for line in ledger_entries(ledger))


def test_a_node_workflow_driven_through_the_gateway_survives_sigkill_of_its_worker(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # The killed worker's leases go over once they expire (no goodbye: its steps might run on).
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    doomed = cluster.start_node_worker("node-1", "node", ledger)
    client = cluster.client()
    client.start_workflow(
        "node_order", {"item": "book", "gate": str(gate)}, workflow_id="order-1", task_queue="node"
    )
    wait_until(lambda: kinds(ledger)["hold"] == 1, WAIT, "the hold step to start")
    assert client.query("order-1", "phase") == "reserved"

    doomed.kill()  # kill -9 in the middle of the hold step
    cluster.start_node_worker("node-2", "node", ledger)
    gate.touch()
    assert client.signal("order-1", "approve", {"by": "ops"}, signal_id="approve-1")
    described = client.wait("order-1", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
    assert result_of(described) == {
        "reserved": {"item": "book"},
        "approval": {"by": "ops"},
        "charge": None,
        "shipped": {"shipped": True},
    }
    # The completed step did not run again; the interrupted one did, on the new worker.
    assert kinds(ledger) == Counter({"reserve": 1, "hold": 2, "ship": 1})
    holds = [line["identity"] for line in ledger_entries(ledger) if line["kind"] == "hold"]
    assert holds == ["node-1", "node-2"]
    assert client.query("order-1", "phase") == "shipping"


def test_steps_cross_languages_both_ways(cluster: Cluster, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("py-runner", MODULE, task_queue="runs")
    cluster.start_worker("py-tools", MODULE, task_queue="py-tools")
    cluster.start_node_worker("node-tools", "node-tools", ledger)
    client = cluster.client()

    # A Python workflow calls a step a Node.js worker executes.
    client.start_workflow(
        "calls_remote",
        {"step": "notify", "input": {"message": "hello"}, "queue": "node-tools"},
        workflow_id="py-calls-node",
        task_queue="runs",
    )
    # A Node.js workflow calls a step a Python worker executes.
    client.start_workflow(
        "node_order",
        {"item": "lamp", "charge_queue": "py-tools", "amount": 5, "sleep_seconds": 0},
        workflow_id="node-calls-py",
        task_queue="node-tools",
    )
    client.signal("node-calls-py", "approve", "yes")

    py_run = client.wait("py-calls-node", timeout=WAIT)
    node_run = client.wait("node-calls-py", timeout=WAIT)

    assert result_of(py_run)["remote"] == {"delivered": True, "by": "node", "message": "hello"}
    assert result_of(node_run)["charge"] == {"charged": 5, "by": "python"}
    [charged] = remote_outcomes(client, "node-calls-py")
    assert (charged.step_id, charged.step_name, charged.fence) == ("charge", "charge", 1)


def test_a_failing_node_step_is_retried_on_the_durable_schedule(
    cluster: Cluster, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("py-runner", MODULE, task_queue="runs")
    cluster.start_node_worker("node-tools", "node-tools", ledger)
    client = cluster.client()
    client.start_workflow(
        "calls_remote",
        {"step": "flaky", "input": {"fail_times": 2}, "queue": "node-tools"},
        workflow_id="flaky-node",
        task_queue="runs",
    )

    described = client.wait("flaky-node", timeout=WAIT)

    assert result_of(described)["remote"] == {"attempts": 3}
    failed = [
        e for e in client.history("flaky-node") if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED
    ]
    assert [(e.attempt, e.failure.type, e.fence) for e in failed] == [
        (1, "FlakyError", 1),
        (2, "FlakyError", 2),
    ]
    assert [line["attempt"] for line in ledger_entries(ledger)] == [1, 2, 3]


def test_fan_out_across_a_python_and_a_node_worker_survives_killing_the_node_one(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # The killed worker's leases go over once they expire (no goodbye: its steps might run on).
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger = tmp_path / "ledger"
    cluster.start_worker("py-runner", MODULE, task_queue="runs")
    cluster.start_worker("py-tools", MODULE, concurrency=3, task_queue="mixed")
    node = cluster.start_node_worker("node-tools", "mixed", ledger, concurrency=3)
    client = cluster.client()
    # The Node.js worker never finishes a step: the three it takes are in flight when killed.
    step_input = {"delay_ms": 100, "ledger": str(ledger), "stall_on": "node-tools"}
    client.start_workflow(
        "fans_out",
        {"n": 20, "queue": "mixed", "step_input": step_input},
        workflow_id="fan-mixed",
        task_queue="runs",
    )
    wait_until(
        lambda: len(started_by(ledger, "node-tools")) == 3, WAIT, "the Node.js worker's 3 steps"
    )
    node.kill()

    described = client.wait("fan-mixed", timeout=WAIT)

    assert result_of(described) == [n * n for n in range(20)]
    outcomes = remote_outcomes(client, "fan-mixed")
    recorded = Counter(e.step_id for e in outcomes)
    assert len(recorded) == 20 and set(recorded.values()) == {1}, recorded
    # What the Node.js worker held counted as lost attempts (recorded by fence 2) and ran again
    # on the Python one, under fence 3.
    assert {e.step_id for e in outcomes if e.fence == 3} == started_by(ledger, "node-tools")
    assert started_by(ledger, "py-tools") == set(recorded)


def test_model_calls_cross_languages_with_their_usage_journaled(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A Node.js workflow's ctx.modelCall, answered once by a Node.js worker's modelStep and
    once by a Python worker's model_step: each journals the model and usage it reported."""
    cluster.start_worker("py-model", "tests.e2e.model_workflows", task_queue="py-model")
    cluster.start_node_worker("node-tools", "node-tools", tmp_path / "ledger")
    client = cluster.client()
    for queue in ("node-tools", "py-model"):
        client.start_workflow(
            "node_model",
            {"question": f"Why fences? ({queue})", "queue": queue},
            workflow_id=f"model-{queue}",
            task_queue="node-tools",
        )
    for queue in ("node-tools", "py-model"):
        result = result_of(client.wait(f"model-{queue}", timeout=WAIT))
        [outcome] = remote_outcomes(client, f"model-{queue}")
        assert outcome.step_name == "model_call"
        assert outcome.usage.model == result["model"] == "offline-chat-1"
        assert outcome.usage.usage.units == result["usage"]["total_tokens"] > 0
        assert outcome.usage.usage.cost_micros > 0
        assert result["text"]
