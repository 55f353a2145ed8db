"""Build ids and routing by build, end to end (real processes): workers of two builds on one
queue; a pinned type's runs finish on the build that started them while new runs go to the
newest build, and wait (across a kill -9) for a worker of their build; an auto-upgrade type's
runs move to the newest build at their next task; operators see the builds, their workers and
the open runs each holds; bad build ids and policies are refused."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.build_workflows"
WAIT = 60.0
LEASE_TTL = 2.0
# One cluster for the module (a killed worker's lease expires soon); each test starts its
# own workers, on a task queue of its own.
SHARED_ENV = {"PERDURE_LEASE_TTL": str(LEASE_TTL)}
SHARED_WORKER = None
PINNED, UPGRADING = "pinned_flow", "upgrading_flow"
DERIVED = re.compile(r"[0-9a-f]{12}")


@pytest.fixture
def admin_api(shared: Cluster) -> Iterator[admingrpc.AdminServiceStub]:
    with grpc.insecure_channel(shared.gateway) as channel:
        yield admingrpc.AdminServiceStub(channel)


def worker(cluster: Cluster, identity: str, queue: str, build: str) -> Process:
    return cluster.start_worker(identity, module=MODULE, task_queue=queue, PERDURE_BUILD_ID=build)


def set_policy(
    api: admingrpc.AdminServiceStub, workflow_type: str, policy: admin.RoutingPolicy
) -> None:
    request = admin.SetWorkflowPolicyRequest(workflow_type=workflow_type, policy=policy)
    assert api.SetWorkflowPolicy(request, timeout=30).policy.policy == policy


def start(client: Client, workflow_type: str, queue: str, **args: float) -> str:
    return client.start_workflow(workflow_type, dict(args), task_queue=queue).workflow_id


def waiting_for_go(client: Client, workflow_id: str) -> wf.WorkflowInfo:
    """The run once it waits for its signal (its first step done)."""

    def waits() -> bool:
        info = client.describe(workflow_id).workflow
        return info.status == wf.WORKFLOW_STATUS_WAITING and info.wait.name == "go"

    wait_until(waits, WAIT, f"{workflow_id} waiting for go")
    return client.describe(workflow_id).workflow


def finished(client: Client, workflow_id: str) -> list[str]:
    """Which workers ran the run's two steps, once it completed."""
    described = client.wait(workflow_id, timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described.workflow
    ran: list[str] = result_of(described)
    return ran


def builds_on(api: admingrpc.AdminServiceStub, queue: str) -> dict[str, admin.BuildInfo]:
    listed = api.ListBuilds(admin.ListBuildsRequest(task_queue=queue), timeout=30).builds
    return {build.build_id: build for build in listed}


def test_pinned_runs_finish_on_their_build_while_new_runs_go_to_the_newest(
    shared: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    queue = "pinned"
    set_policy(admin_api, PINNED, admin.ROUTING_POLICY_PINNED)
    worker(shared, "old-1", queue, "build-a")
    old_runs = [start(client, PINNED, queue) for _ in range(2)]
    for run in old_runs:
        assert waiting_for_go(client, run).build_id == "build-a"
    worker(shared, "new-1", queue, "build-b")
    new_runs = [start(client, PINNED, queue) for _ in range(2)]
    for run in new_runs:
        assert waiting_for_go(client, run).build_id == "build-b"

    # Operators see both builds, who is newest, and the open runs each still holds.
    builds = builds_on(admin_api, queue)
    assert (builds["build-a"].open_runs, builds["build-a"].pinned_runs) == (2, 2)
    assert (builds["build-b"].open_runs, builds["build-b"].pinned_runs) == (2, 2)
    assert list(builds["build-b"].newest_for) == [PINNED, UPGRADING]
    assert list(builds["build-a"].newest_for) == []
    assert builds["build-a"].connected_workers == builds["build-b"].connected_workers == 1
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "perdure.cli",
            "workers",
            "--json",
            "--task-queue",
            queue,
            "--address",
            shared.gateway,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(shown.stdout)
    counts = {b["build_id"]: b.get("open_runs") for b in seen["builds"]}
    assert counts == {"build-a": "2", "build-b": "2"}  # int64 is a string in JSON
    assert {(w["identity"], w["build_id"]) for w in seen["workers"]} == {
        ("old-1", "build-a"),
        ("new-1", "build-b"),
    }
    table = subprocess.run(
        [
            sys.executable,
            "-m",
            "perdure.cli",
            "workers",
            "--task-queue",
            queue,
            "--address",
            shared.gateway,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "build-a" in table and "OPEN RUNS" in table and "pinned" in table

    for run in old_runs + new_runs:
        client.signal(run, "go", None)
    for run in old_runs:
        assert finished(client, run) == ["old-1", "old-1"]
    for run in new_runs:
        assert finished(client, run) == ["new-1", "new-1"]
    assert builds_on(admin_api, queue)["build-a"].open_runs == 0  # build-a may stop now


def test_a_pinned_run_waits_for_a_worker_of_its_build_across_a_kill(
    shared: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    queue = "pinned-kill"
    set_policy(admin_api, PINNED, admin.ROUTING_POLICY_PINNED)
    old = worker(shared, "old-2", queue, "build-a")
    run = start(client, PINNED, queue, hold=30.0)
    waiting_for_go(client, run)
    worker(shared, "new-2", queue, "build-b")
    client.signal(run, "go", None)
    # The second step is under way on build-a's worker when it is killed.
    wait_until(lambda: client.describe(run).current_step == "second", WAIT, "second step")
    fence = client.describe(run).workflow.fence
    old.signal(signal.SIGKILL)
    # Its lease expires; build-b's worker is free and serves the type, yet must not take it.
    time.sleep(LEASE_TTL * 2.5)
    assert client.describe(run).workflow.fence == fence  # nobody loaded it since
    assert builds_on(admin_api, queue)["build-a"].connected_workers == 0
    worker(shared, "old-3", queue, "build-a")
    described = client.wait(run, timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert result_of(described) == ["old-2", "old-3"]


def test_auto_upgrade_moves_a_run_to_the_newest_build_at_its_next_task(
    shared: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    queue = "upgrade"
    set_policy(admin_api, UPGRADING, admin.ROUTING_POLICY_AUTO_UPGRADE)
    worker(shared, "old-4", queue, "build-a")
    run = start(client, UPGRADING, queue)
    waiting_for_go(client, run)
    worker(shared, "new-4", queue, "build-b")
    client.signal(run, "go", None)
    assert finished(client, run) == ["old-4", "new-4"]
    assert client.describe(run).workflow.build_id == "build-a"  # the build that started it


def test_build_ids_are_derived_when_not_set_in_both_sdks(
    shared: Cluster, admin_api: admingrpc.AdminServiceStub, tmp_path: object
) -> None:
    queue = "derived"
    shared.start_worker("py-derived", module=MODULE, task_queue=queue)
    shared.start_node_worker("node-derived", queue, shared.workdir / "node-derived.ledger")
    listed = admin_api.ListWorkers(admin.ListWorkersRequest(task_queue=queue), timeout=30)
    builds = {w.identity: w.build_id for w in listed.workers}
    assert set(builds) == {"py-derived", "node-derived"}
    assert all(DERIVED.fullmatch(build) for build in builds.values()), builds
    assert builds["py-derived"] != builds["node-derived"]


@pytest.mark.parametrize("build_id", ["x" * 65, "line\nbreak", " padded"])
def test_bad_build_ids_are_refused(shared: Cluster, build_id: str) -> None:
    with grpc.insecure_channel(shared.target("scheduler")) as channel:
        hello = tpb.Hello(
            identity="bad",
            task_queue="bad",
            workflow_types=[PINNED],
            capacity=1,
            build_id=build_id,
        )
        stream = tgrpc.TaskServiceStub(channel).Connect(
            iter([tpb.ConnectRequest(hello=hello)]), timeout=30
        )
        with pytest.raises(grpc.RpcError) as refused:
            list(stream)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "hello.build_id must be at most 64 printable characters" in str(refused.value.details())
    with grpc.insecure_channel(shared.target("history")) as channel:
        load = jpb.LoadJournalRequest(workflow_id="anything", fence=1, build_id=build_id)
        with pytest.raises(grpc.RpcError) as refused:
            jgrpc.JournalServiceStub(channel).LoadJournal(load, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"workflow_type": PINNED}, "policy 0 is not a routing policy"),
        ({"workflow_type": PINNED, "policy": 7}, "policy 7 is not a routing policy"),
        ({"policy": admin.ROUTING_POLICY_PINNED}, "workflow_type is required"),
        ({"workflow_type": "no spaces", "policy": 2}, "is not a valid name"),
        ({"workflow_type": PINNED, "policy": 2, "namespace": "Bad_NS"}, "namespace"),
    ],
)
def test_bad_policies_are_refused(
    admin_api: admingrpc.AdminServiceStub, request_fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        admin_api.SetWorkflowPolicy(admin.SetWorkflowPolicyRequest(**request_fields), timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in str(refused.value.details())
    policies = admin_api.ListWorkflowPolicies(admin.ListWorkflowPoliciesRequest(), timeout=30)
    assert all(p.policy != 7 for p in policies.policies)


def test_the_workers_page_shows_builds_with_their_open_runs_and_sets_a_policy(
    shared: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    from playwright.sync_api import expect

    queue = "ui"
    worker(shared, "ui-1", queue, "build-ui")
    run = start(client, UPGRADING, queue)
    waiting_for_go(client, run)
    with chromium() as browser:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            page = context.new_page()
            page.goto(f"http://{shared.http_address}/#/workers")
            builds = page.get_by_test_id("builds-table")
            row = builds.locator("tr", has_text="build-ui")
            # Task queue, build, first and last seen, workers, open runs (1), pinned runs (0).
            expect(row.locator("td").nth(5)).to_have_text("1", timeout=TIMEOUT_MS)
            expect(page.get_by_test_id("workers-table")).to_contain_text("ui-1")
            form = page.get_by_test_id("policy-form")
            form.locator("input").fill(UPGRADING)
            form.locator("select").select_option("ROUTING_POLICY_AUTO_UPGRADE")
            form.get_by_role("button").click()
            policies = page.get_by_test_id("policies-table")
            expect(policies.locator("tr", has_text=UPGRADING)).to_contain_text(
                "auto-upgrade", timeout=TIMEOUT_MS
            )
            page.goto(f"http://{shared.http_address}/#/workflows/{run}")
            expect(page.get_by_test_id("workflow-build")).to_contain_text("build-ui")
        finally:
            context.close()
    listed = admin_api.ListWorkflowPolicies(admin.ListWorkflowPoliciesRequest(), timeout=30)
    assert {p.workflow_type: p.policy for p in listed.policies}[UPGRADING] == (
        admin.ROUTING_POLICY_AUTO_UPGRADE
    )
    client.signal(run, "go", None)
    assert finished(client, run) == ["ui-1", "ui-1"]
