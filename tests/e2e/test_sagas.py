"""Sagas and standing objectives on real services and workers (Python and Node.js) on a real
PostgreSQL: compensations run last first, once each, across a kill -9 of the worker in the
middle of them; an agent loop steered and abandoned by a person through the gateway."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.e2e.test_attempts import attempts, keep_alive, until_closed
from tests.fixtures.cluster import Cluster, wait_until

MODULE = "tests.e2e.saga_workflows"
WAIT = 90.0  # upper bound of any wait for a run to get somewhere


def completed(client: Client, workflow_id: str) -> list[str]:
    """The step ids of the run's STEP_COMPLETED and STEP_FAILED events, in journal order."""
    outcomes = (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_STEP_FAILED)
    return [e.step_id for e in client.history(workflow_id) if e.event_type in outcomes]


def test_a_failed_saga_compensates_last_first_once_each_across_a_kill(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, marker = tmp_path / "ledger", tmp_path / "marker"
    restart = keep_alive(lambda: cluster.start_worker("saga", module=MODULE))
    params = {"ledger": str(ledger), "marker": str(marker), "order": "order-7"}
    with Client(cluster.gateway) as client:
        client.start_workflow("saga_trip", params, workflow_id="saga-1")
        described = until_closed(client, "saga-1", restart)

        # The run fails with the step's own failure, not the compensations'.
        assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
        assert described.workflow.failure.type == "StepFailedError"
        assert "'ship' failed: OutOfStockError: no stock for order-7" in (
            described.workflow.failure.message
        )
        # Each body ran in this order; the refund's first run killed its worker (kill -9)
        # before it did anything, and the next worker ran it again, once.
        lines = ledger.read_text().splitlines()
        assert [line.rsplit(" ", 1)[0] for line in lines] == [
            "reserve",
            "charge",
            "ship",
            "start refund",
            "start refund",
            "refund",
            "release",
        ]
        killed, again = lines[3].rsplit(" ", 1)[1], lines[4].rsplit(" ", 1)[1]
        assert killed != again and marker.exists()
        # Journaled once each, the refund before the release; the lost attempt counted.
        assert completed(client, "saga-1") == ["reserve", "charge", "ship", "refund", "release"]
        assert attempts(client, "saga-1", "refund") == [
            ("STEP_ATTEMPT_STARTED", 1, ""),
            ("STEP_ATTEMPT_FAILED", 1, "WorkerLostError"),
            ("STEP_ATTEMPT_STARTED", 2, ""),
            ("STEP_COMPLETED", 2, ""),
        ]
        assert attempts(client, "saga-1", "release") == [
            ("STEP_ATTEMPT_STARTED", 1, ""),
            ("STEP_COMPLETED", 1, ""),
        ]


def test_a_node_saga_compensates_last_first_once_each_across_a_kill(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, marker = tmp_path / "ledger", tmp_path / "marker"
    restart = keep_alive(lambda: cluster.start_node_worker("saga", "node-saga", ledger))
    with Client(cluster.gateway) as client:
        client.start_workflow(
            "node_saga_trip", {"marker": str(marker)}, workflow_id="saga-2", task_queue="node-saga"
        )
        described = until_closed(client, "saga-2", restart)

        assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
        assert described.workflow.failure.type == "StepFailedError"
        assert "'ship' failed: OutOfStock: no stock for saga-2" in (
            described.workflow.failure.message
        )
        lines = [json.loads(line) for line in ledger.read_text().splitlines()]
        assert [(line["kind"], line["attempt"]) for line in lines] == [
            ("reserve", 1),
            ("charge", 1),
            ("ship", 1),
            ("start refund", 1),
            ("start refund", 2),
            ("refund", 2),
            ("release", 1),
        ]
        assert completed(client, "saga-2") == ["reserve", "charge", "ship", "refund", "release"]
        assert [a[:2] for a in attempts(client, "saga-2", "refund")] == [
            ("STEP_ATTEMPT_STARTED", 1),
            ("STEP_ATTEMPT_FAILED", 1),
            ("STEP_ATTEMPT_STARTED", 2),
            ("STEP_COMPLETED", 2),
        ]


def published(client: Client, workflow_id: str) -> dict[str, Any]:
    """What the loop published under "objective" (empty before it did)."""
    state = client.describe(workflow_id).state
    return from_payload(state["objective"]) if "objective" in state else {}


def test_a_person_steers_then_abandons_a_standing_objective(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster()
    ledger, gates = tmp_path / "ledger", tmp_path / "gates"
    gates.mkdir()
    cluster.start_worker("loop", module=MODULE)
    params = {"ledger": str(ledger), "gates": str(gates), "objective": "find flights"}

    def noted(line: str) -> bool:
        return ledger.exists() and line in ledger.read_text().splitlines()

    with Client(cluster.gateway) as client:
        client.start_workflow("standing_search", params, workflow_id="loop-1")
        wait_until(lambda: noted("turn 1 find flights"), WAIT, "the first turn")
        assert published(client, "loop-1") == {
            "objective": "find flights",
            "status": "running",
            "turns": 0,
            "max_turns": 10,
            "spent": 0,
            "budget": None,
        }
        # A person steers while the first turn runs: the next turn works to the new objective.
        steering = {"objective": "find trains", "guidance": "no night trains"}
        assert client.signal("loop-1", "steer", steering)
        (gates / "1").touch()
        wait_until(lambda: noted("turn 2 find trains no night trains"), WAIT, "the steered turn")
        assert published(client, "loop-1")["objective"] == "find trains"
        assert published(client, "loop-1")["turns"] == 1

        # Then abandons it: the loop stops before a third turn.
        assert client.signal("loop-1", "abandon", "plans changed")
        (gates / "2").touch()
        described = client.wait("loop-1", timeout=WAIT)

        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        assert from_payload(described.workflow.result) == {
            "reason": "abandoned",
            "turns": 2,
            "objective": "find trains",
            "state": ["find flights #1", "find trains #2"],
            "spent": 2,
            "guidance": ["no night trains"],
        }
        assert from_payload(described.state["objective"])["status"] == "abandoned"
        assert not any(line.startswith("turn 3") for line in ledger.read_text().splitlines())
