"""Flow control through real processes: keys' limits, budgets reserved before a step is granted
and settled once, a run that chose to fail on its budget, across two scheduler replicas and
workers killed mid-step, with a checker sampling the database throughout."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Budget
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.flow_checker import FlowChecker
from tests.fixtures.ledger import ledger_entries
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.flow_workflows"
WAIT = 120.0
RATE = 20.0  # the fan-out's key: grants a second


@pytest.fixture
def two_schedulers(start_cluster: Callable[..., Cluster]) -> Cluster:
    """Two scheduler replicas; leases short enough that a killed worker's expire soon."""
    return start_cluster(replicas={"scheduler": 2}, PERDURE_LEASE_TTL="3")


@pytest.fixture
def admin_api(two_schedulers: Cluster) -> Iterator[admingrpc.AdminServiceStub]:
    with grpc.insecure_channel(two_schedulers.gateway) as channel:
        yield admingrpc.AdminServiceStub(channel)


def held_back(dsn: str, workflow_id: str, step_id: str) -> bool:
    """Whether the step's task has been due and ungranted for over a second (two of the
    scheduler's idle rounds at least)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT lease_owner IS NULL AND run_at < now() - interval '1 second'"
            " FROM scheduler.tasks WHERE workflow_id = %s AND step_id = %s",
            [workflow_id, step_id],
        ).fetchone()
    return row is not None and bool(row[0])


def max_in_window(moments: list[float], seconds: float) -> int:
    """The most of `moments` (sorted) within any `seconds`."""
    most, first = 0, 0
    for last, moment in enumerate(moments):
        while moment - moments[first] > seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


def max_overlap(entries: list[dict[str, float]]) -> int:
    """The most step bodies that ran at once, from their begin and end times."""
    edges = sorted([(e["began"], 1) for e in entries] + [(e["ended"], -1) for e in entries])
    running = peak = 0
    for _, change in edges:
        running += change
        peak = max(peak, running)
    return peak


def test_a_key_limit_on_runs_holds_across_two_scheduler_replicas(
    two_schedulers: Cluster, admin_api: admingrpc.AdminServiceStub, tmp_path: Path
) -> None:
    cluster = two_schedulers
    ledger = tmp_path / "ledger"
    limit = admin.FlowLimit(key="tenant:acme", max_runs=2)
    admin_api.SetFlowLimit(admin.SetFlowLimitRequest(limit=limit), timeout=30)
    for name in ("w1", "w2"):
        cluster.start_worker(name, MODULE, concurrency=5)
    with cluster.client() as client, FlowChecker(cluster.dsn) as checker:
        for i in range(8):
            client.start_workflow(
                "keyed_run",
                {"hold": 0.5, "ledger": str(ledger)},
                workflow_id=f"acme-{i}",
                keys=["tenant:acme"],
            )
        for i in range(8):
            assert result_of(client.wait(f"acme-{i}", timeout=WAIT)) == "held"
    assert not checker.violations, checker.violations[:5]
    assert checker.peaks["tenant:acme"] == 2  # the limit was reached, never passed
    assert max_overlap(ledger_entries(ledger)) <= 2


def test_a_run_that_chose_to_fail_stops_at_its_budget_with_budget_exceeded(
    two_schedulers: Cluster, admin_api: admingrpc.AdminServiceStub, tmp_path: Path
) -> None:
    cluster = two_schedulers
    ledger = tmp_path / "ledger"
    cluster.start_worker("w1", MODULE)
    with cluster.client() as client:
        client.start_workflow(
            "spend_until_refused",
            {"estimate": 30, "use": 25, "ledger": str(ledger)},
            workflow_id="agent-1",
            budget=Budget(units=100),
            on_budget_exceeded="fail",
        )
        described = client.wait("agent-1", timeout=WAIT)
    # 30 reserved per step; each settles at 25: 25+25+25+30 > 100 refuses the fourth.
    result = result_of(described)
    assert result["steps"] == 3, result
    assert "the run's budget has 25 of 100 units left" in result["refused"]
    failed = [s for s in described.steps if s.status == wf.STEP_STATUS_FAILED]
    assert [s.failure.type for s in failed] == ["BudgetExceeded"]
    assert len(ledger_entries(ledger)) == 3  # the refused step never ran
    flow = described.flow  # describe shows the budget and its use
    assert flow.settings.budget.units == 100
    assert (flow.reserved.units, flow.spent.units, flow.refusals) == (0, 75, 1)
    request = admin.ListBudgetsRequest(workflow_id="agent-1")
    [budget] = admin_api.ListBudgets(request, timeout=30).budgets
    assert budget.workflow_id == "agent-1"
    assert (budget.reserved.units, budget.spent.units, budget.refusals) == (0, 75, 1)


def test_a_waiting_step_runs_once_an_operator_raises_the_budget(
    two_schedulers: Cluster, admin_api: admingrpc.AdminServiceStub, tmp_path: Path
) -> None:
    cluster = two_schedulers
    ledger = tmp_path / "ledger"
    budget = admin.BudgetInfo(key="team:research", limit=fpb.Budget(units=60))
    admin_api.SetBudget(admin.SetBudgetRequest(budget=budget), timeout=30)
    cluster.start_worker("w1", MODULE)
    with cluster.client() as client:
        client.start_workflow(
            "fan_out",
            {"count": 3, "estimate": 30, "use": 30, "ledger": str(ledger)},
            workflow_id="research-1",
            keys=["team:research"],
        )

        def spent() -> list[tuple[str, int, int]]:
            listed = admin_api.ListBudgets(admin.ListBudgetsRequest(), timeout=30).budgets
            return [(b.key, b.reserved.units, b.spent.units) for b in listed]

        wait_until(lambda: spent() == [("team:research", 0, 60)], WAIT, "two steps settled")
        assert len(ledger_entries(ledger)) == 2
        # The third step is due and passed over, round after round, for want of budget.
        wait_until(lambda: held_back(cluster.dsn, "research-1", "spend#3"), WAIT, "held back")
        assert len(ledger_entries(ledger)) == 2
        raised = admin.BudgetInfo(key="team:research", limit=fpb.Budget(units=90))
        admin_api.SetBudget(admin.SetBudgetRequest(budget=raised), timeout=30)
        described = client.wait("research-1", timeout=WAIT)
    assert result_of(described) == {"done": 3, "refused": False}
    assert len(ledger_entries(ledger)) == 3


def test_a_budget_under_a_fan_out_is_never_overspent_while_workers_and_a_scheduler_die(
    two_schedulers: Cluster, admin_api: admingrpc.AdminServiceStub, tmp_path: Path
) -> None:
    cluster = two_schedulers
    ledger = tmp_path / "ledger"
    budget = admin.BudgetInfo(limit=fpb.Budget(units=600))  # the namespace's
    admin_api.SetBudget(admin.SetBudgetRequest(budget=budget), timeout=30)
    limit = admin.FlowLimit(key="provider:llm", max_steps=8, requests_per_second=RATE)
    admin_api.SetFlowLimit(admin.SetFlowLimitRequest(limit=limit), timeout=30)
    cluster.start_worker("runner", MODULE, task_queue="runs")
    tools = [cluster.start_worker(f"tool-{i}", MODULE, task_queue="tools") for i in range(2)]
    with cluster.client() as client, FlowChecker(cluster.dsn) as checker:
        client.start_workflow(
            "fan_out",
            {
                "count": 100,
                "estimate": 10,
                "use": 9,
                "hold": 0.2,
                "ledger": str(ledger),
                "queue": "tools",
                "keys": ["provider:llm"],
            },
            workflow_id="fan-1",
            task_queue="runs",
            on_budget_exceeded="fail",
        )
        wait_until(lambda: len(ledger_entries(ledger)) >= 10, WAIT, "steps under way")
        tools[0].signal(signal.SIGKILL)  # mid-step: its reservations settle at the estimate
        first_scheduler = next(p for p in cluster.processes if p.name == "scheduler")
        first_scheduler.signal(signal.SIGKILL)
        cluster.start_worker("tool-2", MODULE, task_queue="tools")
        described = client.wait("fan-1", timeout=WAIT)
    assert result_of(described) == {"done": None, "refused": True}
    assert not checker.violations, checker.violations[:5]
    assert checker.peaks["provider:llm"] <= 8
    # Never faster than the rate: in any two seconds, two seconds' grants and a burst (a body
    # starts after its grant, so a late delivery may bunch a few). Steps refused by the
    # budget ran nothing and took no request: only the bodies that ran count.
    starts = sorted(entry["began"] for entry in ledger_entries(ledger))
    assert max_in_window(starts, 2.0) <= 2 * RATE + 2 + 5, starts

    def namespace_budget() -> admin.BudgetInfo:
        listed = admin_api.ListBudgets(admin.ListBudgetsRequest(), timeout=30)
        [found] = listed.budgets
        assert isinstance(found, admin.BudgetInfo)
        return found

    # The last steps' TaskDone may come after the run closed.
    wait_until(lambda: namespace_budget().reserved.units == 0, WAIT, "every reservation settled")
    spent = namespace_budget()
    # Every unit reported, and the estimate of every attempt that reported nothing (the
    # killed worker's), counted: never more than the budget.
    reported = sum(entry["used"] for entry in ledger_entries(ledger))
    assert 0 < reported <= spent.spent.units <= 600, spent
