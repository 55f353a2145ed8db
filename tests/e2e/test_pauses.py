"""Pause and unpause, end to end (real processes, two scheduler replicas): a paused task queue,
workflow type or workflow id is granted nothing more while leases already granted finish;
its timers come due and wait; unpausing lets every run finish; describe shows what holds a
run; pausing is idempotent and refuses what does not exist."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime

import grpc
import psycopg
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium, screenshot
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.postgres import Databases
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.pause_workflows"
QUEUE = "paused-q"
WAIT = 60.0
# How long a pause is watched for grants that should not come: many scheduling rounds (each
# replica looks at least every 0.5 s).
QUIET = 2.5
# Each run's steps, each followed by a timer long enough to suspend the run (a shorter one is
# waited out in the worker, under the same lease).
STEPS, GAP = 30, 0.3


@pytest.fixture(scope="module")
def paused_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two scheduler replicas; two workers on QUEUE, one connected to each replica, and one
    on the default queue."""
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, tmp_path_factory.mktemp("pauses"), replicas={"scheduler": 2})
        try:
            cluster.start_services()
            for replica, identity in enumerate(("qa", "qb")):
                cluster.start_worker(
                    identity,
                    module=MODULE,
                    task_queue=QUEUE,
                    concurrency=4,
                    PERDURE_SCHEDULER_ADDRESS=cluster.address("scheduler", replica),
                )
            cluster.start_worker("main", module=MODULE, concurrency=10)
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def client(paused_cluster: Cluster) -> Iterator[Client]:
    with paused_cluster.client() as connected:
        yield connected


@pytest.fixture
def admin_api(paused_cluster: Cluster) -> Iterator[admingrpc.AdminServiceStub]:
    with grpc.insecure_channel(paused_cluster.gateway) as channel:
        yield admingrpc.AdminServiceStub(channel)


def grants(cluster: Cluster, workflow_ids: list[str]) -> tuple[int, int]:
    """Every lease ever granted of these runs' tasks (their fences' sum), and how many are
    held now."""
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute(
            "SELECT COALESCE(sum(fence), 0), count(*) FILTER (WHERE lease_owner IS NOT NULL) "
            "FROM scheduler.tasks WHERE workflow_id = ANY(%s)",
            [workflow_ids],
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def settled_while_paused(cluster: Cluster, workflow_ids: list[str]) -> int:
    """Once the leases held at the pause are done, the grants stay as they are: return them."""
    wait_until(lambda: grants(cluster, workflow_ids)[1] == 0, WAIT, "leases held to finish")
    settled = grants(cluster, workflow_ids)[0]
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        assert grants(cluster, workflow_ids) == (settled, 0), "a paused task was granted"
        time.sleep(0.1)
    return settled


def start_tickers(client: Client, count: int, queue: str = "", kind: str = "ticker") -> list[str]:
    return [
        client.start_workflow(kind, {"steps": STEPS, "gap": GAP}, task_queue=queue).workflow_id
        for _ in range(count)
    ]


def all_complete(client: Client, workflow_ids: list[str]) -> None:
    for workflow_id in workflow_ids:
        described = client.wait(workflow_id, timeout=WAIT)
        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described.workflow
        assert result_of(described) == STEPS
        assert not described.pauses


def test_pausing_a_task_queue_stops_its_grants_and_unpausing_finishes_every_run(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    runs = start_tickers(client, 6, QUEUE)
    wait_until(lambda: grants(paused_cluster, runs)[0] >= 12, WAIT, "runs under way")
    answer = admin_api.Pause(admin.PauseRequest(task_queue=QUEUE, reason="deploy"), timeout=30)
    assert answer.changed and answer.pause.scope == wf.PAUSE_SCOPE_TASK_QUEUE
    at_pause = grants(paused_cluster, runs)
    settled = settled_while_paused(paused_cluster, runs)
    # Only the grants a claim under way at the pause made came after it (at most one per
    # worker slot of each session).
    assert settled - at_pause[0] <= 8
    described = client.describe(runs[0])
    assert described.workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert [(p.scope, p.name, p.reason) for p in described.pauses] == [
        (wf.PAUSE_SCOPE_TASK_QUEUE, QUEUE, "deploy")
    ]
    listed = admin_api.ListPauses(admin.ListPausesRequest(), timeout=30).pauses
    assert [(p.scope, p.name) for p in listed] == [(wf.PAUSE_SCOPE_TASK_QUEUE, QUEUE)]

    assert admin_api.Unpause(admin.UnpauseRequest(task_queue=QUEUE), timeout=30).changed
    all_complete(client, runs)


def test_pausing_one_run_leaves_the_others_going(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    held, *others = start_tickers(client, 3)
    wait_until(lambda: grants(paused_cluster, [held])[0] >= 2, WAIT, "the run under way")
    admin_api.Pause(admin.PauseRequest(workflow_id=held), timeout=30)
    settled = settled_while_paused(paused_cluster, [held])
    all_complete(client, others)
    assert grants(paused_cluster, [held]) == (settled, 0)
    described = client.describe(held)
    assert described.workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert [(p.scope, p.name) for p in described.pauses] == [(wf.PAUSE_SCOPE_WORKFLOW, held)]

    admin_api.Unpause(admin.UnpauseRequest(workflow_id=held), timeout=30)
    all_complete(client, [held])


def test_pausing_a_workflow_type_holds_its_runs_only(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    held = start_tickers(client, 2, kind="other_ticker")
    going = start_tickers(client, 2)
    wait_until(lambda: grants(paused_cluster, held)[0] >= 4, WAIT, "the runs under way")
    admin_api.Pause(admin.PauseRequest(workflow_type="other_ticker"), timeout=30)
    settled = settled_while_paused(paused_cluster, held)
    all_complete(client, going)
    assert grants(paused_cluster, held) == (settled, 0)
    pauses = client.describe(held[0]).pauses
    assert [(p.scope, p.name) for p in pauses] == [(wf.PAUSE_SCOPE_WORKFLOW_TYPE, "other_ticker")]

    admin_api.Unpause(admin.UnpauseRequest(workflow_type="other_ticker"), timeout=30)
    all_complete(client, held)


def db_now(cluster: Cluster) -> datetime:
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


def test_a_paused_runs_timer_fires_only_after_unpause(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    run = client.start_workflow("sleeper", {"seconds": 1.0}).workflow_id

    def sleeping() -> bool:
        info = client.describe(run).workflow
        return info.status == wf.WORKFLOW_STATUS_WAITING and info.wait.kind == wf.WAIT_KIND_TIMER

    wait_until(sleeping, WAIT, "the run waiting on its timer")
    admin_api.Pause(admin.PauseRequest(workflow_id=run), timeout=30)
    due = client.describe(run).workflow.wait.until.ToDatetime().timestamp()
    wait_until(lambda: db_now(paused_cluster).timestamp() > due + 1.0, WAIT, "the timer due")
    assert client.describe(run).workflow.status == wf.WORKFLOW_STATUS_WAITING

    unpaused_at = db_now(paused_cluster)
    admin_api.Unpause(admin.UnpauseRequest(workflow_id=run), timeout=30)
    described = client.wait(run, timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert datetime.fromisoformat(result_of(described)) >= unpaused_at


def test_pausing_is_idempotent_and_refuses_what_does_not_exist(
    client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    run = client.start_workflow("sleeper", {"seconds": 3600}).workflow_id
    first = admin_api.Pause(admin.PauseRequest(workflow_id=run, reason="look"), timeout=30)
    again = admin_api.Pause(admin.PauseRequest(workflow_id=run, reason="other"), timeout=30)
    assert (first.changed, again.changed) == (True, False)
    assert again.pause.reason == "look" and again.pause.pause_time == first.pause.pause_time
    assert admin_api.Unpause(admin.UnpauseRequest(workflow_id=run), timeout=30).changed
    assert not admin_api.Unpause(admin.UnpauseRequest(workflow_id=run), timeout=30).changed
    # Every call is in the audit log, newest first, the repeated ones too.
    logged = [
        (e.action, e.details["scope"], e.details["reason"], e.details["changed"])
        for e in admin_api.ListAuditEvents(admin.ListAuditEventsRequest(), timeout=30).events
        if e.target == run
    ]
    assert logged == [
        ("UNPAUSED", "PAUSE_SCOPE_WORKFLOW", "", False),
        ("UNPAUSED", "PAUSE_SCOPE_WORKFLOW", "", True),
        ("PAUSED", "PAUSE_SCOPE_WORKFLOW", "other", False),
        ("PAUSED", "PAUSE_SCOPE_WORKFLOW", "look", True),
    ]

    def refused(request: admin.PauseRequest) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as raised:
            admin_api.Pause(request, timeout=30)
        return raised.value

    error = refused(admin.PauseRequest(workflow_id="no-such-run"))
    assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()
    error = refused(admin.PauseRequest(workflow_type="no_such_type"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "never declared" in str(error.details())
    error = refused(admin.PauseRequest(task_queue="no-such-queue"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "never served" in str(error.details())
    error = refused(admin.PauseRequest())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "exactly one of workflow_id, workflow_type and task_queue" in str(error.details())
    error = refused(admin.PauseRequest(workflow_id=run, task_queue=QUEUE))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT

    client.terminate(run, reason="done")
    error = refused(admin.PauseRequest(workflow_id=run))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "closed" in str(error.details())


def perdure(cluster: Cluster, *args: str) -> str:
    """Run `perdure ARGS --address <gateway>`; its output, once it exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "perdure.cli", *args, "--address", cluster.gateway],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_pauses_and_unpauses_runs_types_and_queues(
    paused_cluster: Cluster, client: Client
) -> None:
    run = client.start_workflow("sleeper", {"seconds": 3600}).workflow_id
    assert perdure(paused_cluster, "workflow", "pause", run, "--reason", "why not") == (
        f"{run}: paused\n"
    )
    assert perdure(paused_cluster, "workflow", "pause", run) == f"{run}: paused already\n"
    perdure(paused_cluster, "pause", "--workflow-type", "ticker")
    listed = perdure(paused_cluster, "pauses").splitlines()
    assert [line.split("\t")[:2] for line in listed] == [
        ["workflow", run],
        ["workflow_type", "ticker"],
    ]
    described = json.loads(perdure(paused_cluster, "workflow", "describe", run))
    assert [p["name"] for p in described["pauses"]] == [run]
    assert described["pauses"][0]["reason"] == "why not"
    assert perdure(paused_cluster, "unpause", "--workflow-type", "ticker") == "ticker: unpaused\n"
    assert perdure(paused_cluster, "workflow", "unpause", run) == f"{run}: unpaused\n"
    assert perdure(paused_cluster, "workflow", "unpause", run) == f"{run}: was not paused\n"
    assert perdure(paused_cluster, "pauses") == ""
    client.terminate(run)


def test_the_web_ui_shows_pauses_and_pauses_a_run(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    from playwright.sync_api import expect

    run = client.start_workflow("sleeper", {"seconds": 3600}).workflow_id
    with chromium() as browser:
        expect.set_options(timeout=TIMEOUT_MS)
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.goto(f"http://{paused_cluster.http_address}/#/workflows/{run}")
        card = page.get_by_test_id("pause-card")
        expect(card.get_by_test_id("pause-state")).to_have_text("Not paused.")
        card.get_by_role("button", name="Pause run").click()
        expect(page.get_by_test_id("paused-tag")).to_have_text("paused (this run)")
        expect(card.get_by_test_id("pause-holders")).to_contain_text(f"By this run ({run})")
        assert [p.name for p in client.describe(run).pauses] == [run]

        admin_api.Pause(admin.PauseRequest(workflow_type="sleeper"), timeout=30)
        page.goto(f"http://{paused_cluster.http_address}/#/?prefix={run}")
        row = page.locator(f'[data-workflow-id="{run}"]')
        expect(row.get_by_test_id("paused-tag")).to_have_text(
            "paused (this run, its workflow type)"
        )
        admin_api.Unpause(admin.UnpauseRequest(workflow_type="sleeper"), timeout=30)
        expect(row.get_by_test_id("paused-tag")).to_have_text("paused (this run)")

        page.goto(f"http://{paused_cluster.http_address}/#/workflows/{run}")
        card.get_by_role("button", name="Unpause run").click()
        expect(page.get_by_test_id("paused-tag")).to_have_count(0)
        expect(card.get_by_test_id("pause-state")).to_have_text("Not paused.")
        screenshot(page, "pauses-run-page")

        # The workers page pauses a type and lists it, with its Unpause button.
        page.goto(f"http://{paused_cluster.http_address}/#/workers")
        form = page.get_by_test_id("pause-form")
        form.get_by_label("Pause").select_option("task_queue")
        form.get_by_placeholder("name").fill(QUEUE)
        form.get_by_label("Reason").fill("from the page")
        form.get_by_role("button", name="Pause").click()
        row = page.get_by_test_id("pause-row")
        expect(row).to_contain_text(QUEUE)
        expect(row).to_contain_text("from the page")
        screenshot(page, "pauses-workers-page", full_page=True)
        listed = admin_api.ListPauses(admin.ListPausesRequest(), timeout=30).pauses
        assert [(p.scope, p.name) for p in listed] == [(wf.PAUSE_SCOPE_TASK_QUEUE, QUEUE)]
        row.get_by_role("button", name="Unpause").click()
        expect(page.get_by_test_id("pauses-table-empty")).to_be_visible()
    assert not client.describe(run).pauses
    client.terminate(run)


def test_a_step_running_at_the_pause_finishes_and_is_recorded(
    paused_cluster: Cluster, client: Client, admin_api: admingrpc.AdminServiceStub
) -> None:
    run = client.start_workflow("slow_then_tick", {"seconds": 2.0}).workflow_id

    def events(kind: int) -> list[wf.HistoryEvent]:
        return [e for e in client.history(run) if e.event_type == kind]

    wait_until(lambda: events(wf.EVENT_TYPE_STEP_ATTEMPT_STARTED), WAIT, "the slow step running")
    admin_api.Pause(admin.PauseRequest(workflow_id=run), timeout=30)
    # The lease held at the pause runs on: the step completes and the run suspends on its
    # timer, recorded; then nothing more is granted.
    settled = settled_while_paused(paused_cluster, [run])
    assert [e.step_id for e in events(wf.EVENT_TYPE_STEP_COMPLETED)] == ["slow"]
    assert client.describe(run).workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert grants(paused_cluster, [run]) == (settled, 0)

    admin_api.Unpause(admin.UnpauseRequest(workflow_id=run), timeout=30)
    assert result_of(client.wait(run, timeout=WAIT)) == ["slow done", 1]
