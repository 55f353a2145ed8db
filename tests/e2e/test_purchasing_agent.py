"""The purchasing agent (examples/purchasing_agent) through real processes: its model calls
under the run's budget, a child run per vendor, an approval that escalates, expires or is
decided, and a saga that compensates last first when the delivery cannot be booked."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.purchasing_agent import suppliers
from examples.purchasing_agent.workflow import DEFAULT_VENDORS
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Budget, Client
from tests.fixtures.approvals import decide_pending, pending_approval
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.runs import result_of

MODULE = "examples.purchasing_agent"
SHARED_ENV = {"PERDURE_EXAMPLE_DB": "{workdir}/purchasing.sqlite3"}
WAIT = 90.0


@pytest.fixture
def database(shared: Cluster) -> Path:
    """The suppliers' database the worker writes (SHARED_ENV), which this process reads."""
    return shared.workdir / "purchasing.sqlite3"


def phase(client: Client, workflow_id: str) -> str:
    state = client.describe(workflow_id).state
    return state["phase"].data.decode().strip('"') if "phase" in state else ""


def test_a_purchase_delegates_quotes_escalates_its_approval_and_stays_within_budget(
    shared: Cluster, client: Client, database: Path
) -> None:
    client.start_workflow(
        "purchasing_agent",
        {"item": "a GPU server", "escalate_after": 1, "approval_timeout": 600},
        workflow_id="buy-1",
        budget=Budget(units=5_000),
        on_budget_exceeded="fail",
    )
    approval = pending_approval(shared.address("gateway"), "buy-1", timeout=WAIT)
    # Escalated after a second undecided; the workflow was told.
    wait_until(lambda: phase(client, "buy-1") == "escalated", WAIT, "the escalation")
    decide_pending(shared.address("gateway"), "buy-1", reason="within the plan")
    described = client.wait("buy-1", timeout=WAIT)
    result = result_of(described)
    assert result["status"] == "purchased", result
    cheapest = min(result["quotes"], key=lambda q: q["price_micros"])
    assert (result["vendor"], result["price_micros"]) == (
        cheapest["vendor"],
        cheapest["price_micros"],
    )
    assert approval.details_sha256  # the decision was bound to these details
    # A child run per vendor, each linked to its parent, each completed.
    children = list(client.list(parent_workflow_id="buy-1").workflows)
    assert sorted(c.workflow_type for c in children) == ["vendor_quote"] * len(DEFAULT_VENDORS)
    assert all(c.status == wf.WORKFLOW_STATUS_COMPLETED for c in children)
    # Two model calls, their usage journaled and within the budget.
    calls = [s for s in described.steps if s.usage.model]
    assert len(calls) == 2
    assert described.flow.spent.units == sum(s.usage.usage.units for s in calls) <= 5_000
    assert suppliers.effects("buy-1", database) == ["hold_funds", "place_order", "book_delivery"]


def test_a_delivery_that_cannot_be_booked_cancels_the_order_then_releases_the_funds(
    shared: Cluster, client: Client, database: Path
) -> None:
    client.start_workflow("purchasing_agent", {"fail_delivery": True}, workflow_id="buy-2")
    decide_pending(shared.address("gateway"), "buy-2", reason="go")
    result = result_of(client.wait("buy-2", timeout=WAIT))
    assert result["status"] == "compensated", result
    assert "no carrier" in result["error"]
    assert suppliers.effects("buy-2", database) == [
        "hold_funds",
        "place_order",
        "cancel_order",
        "release_funds",
    ]


def test_an_approval_nobody_decides_expires_and_ends_the_purchase(
    client: Client, database: Path
) -> None:
    client.start_workflow(
        "purchasing_agent",
        {"escalate_after": 0.5, "approval_timeout": 2},
        workflow_id="buy-3",
    )
    result = result_of(client.wait("buy-3", timeout=WAIT))
    assert result["status"] == "expired", result
    assert suppliers.effects("buy-3", database) == []


def test_a_budget_too_small_stops_the_agent_before_its_first_model_call(
    client: Client, database: Path
) -> None:
    client.start_workflow(
        "purchasing_agent",
        None,
        workflow_id="buy-4",
        budget=Budget(units=10),
        on_budget_exceeded="fail",
    )
    described = client.wait("buy-4", timeout=WAIT)
    assert result_of(described)["status"] == "out_of_budget"
    assert described.flow.spent.units == 0
    assert not list(client.list(parent_workflow_id="buy-4").workflows)
