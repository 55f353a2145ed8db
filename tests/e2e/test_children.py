"""Child workflows on the real services: started exactly once (a parent killed right after its
start call included), their outcomes reaching the parent, the parent-close policies, a parent's
cancellation reaching its children, and the links both ways in describe, history and list."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client, WorkflowNotFoundError
from tests.chaos.proxy import Fault, Proxy
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.child_workflows"
WAIT = 90.0
CLOSED = (wf.WORKFLOW_STATUS_COMPLETED, wf.WORKFLOW_STATUS_FAILED)


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def child_events(client: Client, workflow_id: str) -> list[wf.HistoryEvent]:
    child_types = (
        wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED,
        wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED,
        wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED,
    )
    return [e for e in client.history(workflow_id) if e.event_type in child_types]


def status_of(client: Client, workflow_id: str) -> int:
    """The run's status; unspecified while the id has no run yet."""
    try:
        return client.describe(workflow_id).workflow.status
    except WorkflowNotFoundError:
        return wf.WORKFLOW_STATUS_UNSPECIFIED


def test_a_child_started_by_a_parent_killed_right_after_the_start_runs_once(
    start_cluster: Any, tmp_path: Path
) -> None:
    cluster: Cluster = start_cluster(PERDURE_LEASE_TTL="2")
    ledger, marker = tmp_path / "ledger", tmp_path / "killed"
    first = cluster.start_worker("first", MODULE)
    # The child runs elsewhere: the kill cuts short the parent alone.
    cluster.start_worker("kids", MODULE, task_queue="kids")
    with cluster.client() as client:
        client.start_workflow(
            "parent_adds",
            {"ledger": str(ledger), "kill_marker": str(marker), "child_queue": "kids"},
            workflow_id="killed-parent",
        )
        # The worker kills itself (kill -9) in the step right after StartChild committed.
        wait_until(lambda: first.popen.poll() is not None, WAIT, "the worker to die")
        assert marker.exists()
        cluster.start_worker("second", MODULE)
        described = client.wait("killed-parent", timeout=WAIT)

        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
        result = result_of(described)
        assert result["total"] == 5
        assert result["child"] == "killed-parent-child-0"
        # Started exactly once: one run of the child's id, which ran once.
        ran = [line for line in ledger_lines(ledger) if line["kind"] == "ran"]
        assert [line["child"] for line in ran] == ["killed-parent-child-0"]
        child = client.describe("killed-parent-child-0").workflow
        assert child.run_number == 1 and child.run_id == result["child_run"]
        started, completed = child_events(client, "killed-parent")
        assert started.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED
        assert completed.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_COMPLETED
        assert completed.step_id == started.step_id == "adder"
        assert (completed.child_workflow_id, completed.child_run_id) == (
            "killed-parent-child-0",
            child.run_id,
        )


def test_children_start_once_through_a_link_to_history_that_loses_replies(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The worker reaches history through a proxy that cuts a connection instead of passing a
    reply one time in five: StartChild calls (and the rest) are committed, their answers lost,
    sent again. Each child starts once and runs once, and every result reaches the parent."""
    ledger, count = tmp_path / "ledger", 8
    proxy = Proxy(seed=7)
    try:
        link = proxy.link("worker", "history", ("127.0.0.1", cluster.ports["history"]))
        cluster.start_worker("w", MODULE, PERDURE_HISTORY_ADDRESS=f"127.0.0.1:{link.port}")
        proxy.apply([link], Fault(lose_replies=0.2))
        with cluster.client() as client:
            client.start_workflow(
                "parent_of_many", {"count": count, "ledger": str(ledger)}, workflow_id="lossy"
            )
            wait_until(
                lambda: link.lost_replies >= 5 or status_of(client, "lossy") in CLOSED,
                WAIT,
                "replies lost on the link",
            )
            proxy.heal()
            assert link.lost_replies > 0
            described = client.wait("lossy", timeout=WAIT)
            assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
            assert result_of(described) == list(range(count))
            started = [
                e.child_workflow_id
                for e in child_events(client, "lossy")
                if e.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED
            ]
            assert len(started) == len(set(started)) == count
            listed = client.list(parent_workflow_id="lossy").workflows
            assert sorted(run.workflow_id for run in listed) == sorted(started)
    finally:
        proxy.close()
    ran = Counter(line["child"] for line in ledger_lines(ledger) if line["kind"] == "ran")
    assert ran == dict.fromkeys(started, 1)


def test_children_side_by_side_and_the_links_both_ways(cluster: Cluster) -> None:
    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow("parent_of_two", {"ids": ["two-a", "two-b"]}, workflow_id="two")
        described = client.wait("two", timeout=WAIT)

        assert result_of(described) == [2, 4]
        children = {c.workflow_id: c for c in described.children}
        assert list(children) == ["two-a", "two-b"]
        assert [c.step_id for c in described.children] == ["adder", "adder#2"]
        for child_id, child in children.items():
            assert child.status == wf.WORKFLOW_STATUS_COMPLETED
            assert child.workflow_type == "adder"
            assert child.parent_close_policy == wf.PARENT_CLOSE_POLICY_TERMINATE
            info = client.describe(child_id).workflow
            parent_run = described.workflow.run_id
            assert (info.parent_workflow_id, info.parent_run_id) == ("two", parent_run)
            assert info.run_id == child.run_id
        listed = client.list(parent_workflow_id="two").workflows
        assert sorted(run.workflow_id for run in listed) == ["two-a", "two-b"]
        assert client.list(parent_workflow_id="nobody").workflows == []
        # The parent waited holding no worker, on its children.
        waits = [
            e.wait.kind
            for e in client.history("two")
            if e.event_type == wf.EVENT_TYPE_WORKFLOW_SUSPENDED
        ]
        assert waits and set(waits) == {wf.WAIT_KIND_CHILD}


def test_a_failing_child_raises_child_workflow_failed_error_in_the_parent(cluster: Cluster) -> None:
    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow("parent_catches", {}, workflow_id="catches")
        described = client.wait("catches", timeout=WAIT)

        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        caught = result_of(described)
        assert caught["type"] == "ValueError"
        assert "child refuses this" in caught["message"]
        assert caught["status"] == "FAILED"
        assert caught["child"] == "catches-child-0"
        assert caught["run"] == client.describe("catches-child-0").workflow.run_id
        [_, failed] = child_events(client, "catches")
        assert failed.event_type == wf.EVENT_TYPE_CHILD_WORKFLOW_FAILED
        assert failed.failure.type == "ValueError"


def test_a_child_id_held_by_an_open_run_fails_the_call(cluster: Cluster) -> None:
    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow("waiting_child", {}, workflow_id="held")
        client.start_workflow("parent_reuses_id", {"child_id": "held"}, workflow_id="reuser")
        described = client.wait("reuser", timeout=WAIT)

        assert result_of(described) == {"type": "WorkflowAlreadyStarted", "run": ""}
        assert client.describe("held").workflow.parent_workflow_id == ""  # not its child
        client.terminate("held", "done")


@pytest.mark.parametrize(
    ("policy", "child_status"),
    [
        ("terminate", wf.WORKFLOW_STATUS_TERMINATED),
        ("request_cancel", wf.WORKFLOW_STATUS_CANCELLED),
        ("abandon", wf.WORKFLOW_STATUS_WAITING),
    ],
)
def test_each_parent_close_policy_on_a_real_child(
    cluster: Cluster, tmp_path: Path, policy: str, child_status: int
) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("w", MODULE)
    parent, child = f"leaves-{policy}", f"left-{policy}"
    with cluster.client() as client:
        client.start_workflow(
            "parent_leaves",
            {"child_id": child, "policy": policy, "ledger": str(ledger)},
            workflow_id=parent,
        )
        wait_until(
            lambda: status_of(client, child) == wf.WORKFLOW_STATUS_WAITING, WAIT, "the child"
        )
        client.signal(parent, "finish", None)
        assert client.wait(parent, timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED

        if policy == "abandon":
            # Left alone: still waiting, and it runs on to its own end.
            assert status_of(client, child) == wf.WORKFLOW_STATUS_WAITING
            client.signal(child, "go", None)
            finished = client.wait(child, timeout=WAIT)
            assert finished.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
            return
        finished = client.wait(child, timeout=WAIT)
        assert finished.workflow.status == child_status
        if policy == "request_cancel":
            # The child's code saw the cancellation (WorkflowCancelledError).
            kinds = Counter(line["kind"] for line in ledger_lines(ledger))
            assert kinds["cancelled"] == 1
        else:
            assert "parent workflow" in finished.workflow.failure.message
        # The child's outcome went to the parent's journal? The parent closed first: nothing.
        assert [e.event_type for e in child_events(client, parent)] == [
            wf.EVENT_TYPE_CHILD_WORKFLOW_STARTED
        ]


def test_terminating_a_parent_applies_the_policy(cluster: Cluster) -> None:
    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow(
            "parent_leaves",
            {"child_id": "orphan", "policy": "terminate"},
            workflow_id="terminated-parent",
        )
        wait_until(
            lambda: status_of(client, "orphan") == wf.WORKFLOW_STATUS_WAITING, WAIT, "the child"
        )
        client.terminate("terminated-parent", "enough")
        assert client.wait("orphan", timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_TERMINATED


def test_a_parent_close_committed_with_history_down_still_reaches_its_child(
    start_cluster: Any,
) -> None:
    cluster: Cluster = start_cluster()
    cluster.start_worker("w", MODULE)
    history = next(p for p in cluster.processes if p.name == "history")
    with cluster.client() as client:
        client.start_workflow(
            "parent_leaves",
            {"child_id": "kept-child", "policy": "terminate"},
            workflow_id="closed-offline",
        )
        wait_until(
            lambda: status_of(client, "kept-child") == wf.WORKFLOW_STATUS_WAITING,
            WAIT,
            "the child",
        )
        history.kill()  # kill -9: no history process is left to carry anything out
        # The parent's close commits while no history process runs, as when history crashes
        # right after committing it: its policy is owed durably, in the close's transaction.
        with psycopg.connect(cluster.dsn) as conn:
            conn.execute(
                "UPDATE history.workflows SET status = 'TERMINATED', closed_at = now()"
                " WHERE workflow_id = 'closed-offline'"
            )
            owed = conn.execute("SELECT kind, chain_id FROM history.child_notices").fetchall()
        assert owed == [("parent_closed", "closed-offline")]
        assert status_of_db(cluster, "kept-child") == "WAITING"

        cluster.start_service("history")
        child = client.wait("kept-child", timeout=WAIT)

        assert child.workflow.status == wf.WORKFLOW_STATUS_TERMINATED
        with psycopg.connect(cluster.dsn) as conn:
            assert conn.execute("SELECT count(*) FROM history.child_notices").fetchone() == (0,)


def status_of_db(cluster: Cluster, workflow_id: str) -> str:
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute(
            "SELECT status FROM history.workflows WHERE workflow_id = %s", [workflow_id]
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_cancelling_a_parent_reaches_its_children(cluster: Cluster, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow(
            "parent_waits_for_child",
            {"child_id": "cancel-child", "ledger": str(ledger)},
            workflow_id="cancel-parent",
        )
        wait_until(
            lambda: status_of(client, "cancel-child") == wf.WORKFLOW_STATUS_WAITING,
            WAIT,
            "the child",
        )
        client.cancel("cancel-parent", "stop it all")

        parent = client.wait("cancel-parent", timeout=WAIT)
        child = client.wait("cancel-child", timeout=WAIT)

        assert parent.workflow.status == wf.WORKFLOW_STATUS_CANCELLED
        assert child.workflow.status == wf.WORKFLOW_STATUS_CANCELLED
        assert [line["kind"] for line in ledger_lines(ledger)] == ["cancelled"]
        assert client.query("cancel-parent", "child") == {
            "status": "CANCELLED",
            "type": "WorkflowCancelledError",
        }
        assert "cancel-parent" in child.workflow.failure.message or any(
            "cancel-parent" in e.failure.message
            for e in client.history("cancel-child")
            if e.event_type == wf.EVENT_TYPE_CANCEL_REQUESTED
        )


def test_a_node_parent_runs_python_children(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start_worker("py", MODULE, task_queue="py")
    cluster.start_node_worker("node", "node", tmp_path / "ledger")
    with cluster.client() as client:
        client.start_workflow(
            "node_parent", {"queue": "py"}, workflow_id="node-parent", task_queue="node"
        )
        described = client.wait("node-parent", timeout=WAIT)

        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
        result = result_of(described)
        assert result["total"] == 9
        assert result["child"] == "node-parent-child-0"
        assert result["failed"] == {
            "type": "ValueError",
            "status": "FAILED",
            "child": "node-parent-child-0-failing",
        }
        child = client.describe("node-parent-child-0").workflow
        assert (child.parent_workflow_id, child.run_id) == ("node-parent", result["run"])
        assert child.task_queue == "py"
        assert [c.workflow_id for c in described.children] == [
            "node-parent-child-0",
            "node-parent-child-0-failing",
        ]


def test_the_run_pages_link_a_parent_and_its_children(cluster: Cluster) -> None:
    from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium, screenshot

    cluster.start_worker("w", MODULE)
    with cluster.client() as client:
        client.start_workflow("parent_of_two", {"ids": ["ui-a", "ui-b"]}, workflow_id="ui-parent")
        client.wait("ui-parent", timeout=WAIT)
    with chromium() as browser:
        from playwright.sync_api import expect

        context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        try:
            page.goto(f"http://{cluster.http_address}/#/workflows/ui-parent")
            links = page.get_by_test_id("child-link")
            expect(links).to_have_text(["ui-a", "ui-b"])
            links.first.click()
            expect(page.get_by_test_id("workflow-id")).to_have_text("ui-a")
            parent = page.get_by_test_id("workflow-parent-link")
            expect(parent).to_have_text("ui-parent")
            parent.click()
            expect(page.get_by_test_id("workflow-id")).to_have_text("ui-parent")
            expect(page.get_by_test_id("child")).to_have_count(2)
        finally:
            screenshot(page, "children_links")
            context.close()


def test_children_live_in_their_parent_s_namespace_under_keys(start_cluster: Any) -> None:
    from tests.fixtures.keys import make_key

    cluster: Cluster = start_cluster(PERDURE_AUTH="on")
    worker_key = make_key(cluster, "acme", "worker", "*")
    operator = make_key(cluster, "acme", "operator")
    other = make_key(cluster, "other", "operator")
    cluster.start_worker("acme", MODULE, PERDURE_API_KEY=worker_key)
    with Client(cluster.gateway, api_key=operator) as client:
        client.start_workflow("parent_of_two", {"ids": ["ns-a", "ns-b"]}, workflow_id="ns-parent")
        described = client.wait("ns-parent", timeout=WAIT)

        assert result_of(described) == [2, 4]
        assert [c.workflow_id for c in described.children] == ["ns-a", "ns-b"]
        child = client.describe("ns-a").workflow
        assert (child.namespace, child.parent_workflow_id) == ("acme", "ns-parent")
        listed = client.list(parent_workflow_id="ns-parent").workflows
        assert sorted(run.workflow_id for run in listed) == ["ns-a", "ns-b"]
    with Client(cluster.gateway, api_key=other) as elsewhere:
        assert elsewhere.list(parent_workflow_id="ns-parent").workflows == []
        with pytest.raises(WorkflowNotFoundError):
            elsewhere.describe("ns-a")
