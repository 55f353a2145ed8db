"""Cells through real processes: two (then three) databases, each with its own history and
scheduler, behind one gateway and served by one worker process. Each run's rows are in one
cell only, where the placement puts it; a paged list shows every run once; a child started
inside a cell is found through the gateway; a cell whose history is killed fails only its own
runs' calls (UNAVAILABLE naming it) and its runs complete once it is back; a cell added later
moves no run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf.duration_pb2 import Duration

from perdure.api.admin.v1 import admin_service_pb2 as adminpb
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import approval_service_pb2_grpc as agrpc
from perdure.api.workflow.v1 import schedule_service_pb2 as schedpb
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as schedgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.cli.flags import DEV_KEY_FILE
from perdure.client import Client
from perdure.gateway.placement import place
from tests.fixtures.approvals import decide_pending
from tests.fixtures.cells import Cells
from tests.fixtures.cluster import require_node, wait_connected
from tests.fixtures.dev import data_dir_of, running_dev
from tests.fixtures.postgres import Databases

MODULE = "tests.e2e.cell_workflows"
WAIT = 60.0
SPREAD = [f"spread-{index}" for index in range(12)]


@pytest.fixture(scope="module")
def cells(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cells]:
    with ExitStack() as stack:
        running = Cells(databases, tmp_path_factory.mktemp("cells"), stack)
        running.directory_dsn = stack.enter_context(databases.empty())
        running.add("a")
        running.add("b")
        running.start_gateway()
        running.start_worker("both", MODULE)
        yield running


def cell_of(workflow_id: str, names: tuple[str, ...] = ("a", "b")) -> str:
    return place(list(names), "default", workflow_id)


def id_in(cell: str, prefix: str, names: tuple[str, ...] = ("a", "b")) -> str:
    """The first id `prefix-N` that hashing places in `cell`."""
    return next(f"{prefix}-{n}" for n in range(1000) if cell_of(f"{prefix}-{n}", names) == cell)


def directory(cells: Cells) -> dict[str, str]:
    with psycopg.connect(cells.directory_dsn) as conn:
        rows = conn.execute("SELECT key, cell FROM directory.placements WHERE kind = 'run'")
        return {str(key): str(cell) for key, cell in rows.fetchall()}


def test_runs_spread_over_the_cells_each_in_one_database(cells: Cells) -> None:
    with cells.client() as client:
        for workflow_id in SPREAD:
            client.start_workflow("cell_echo", workflow_id=workflow_id)
        for workflow_id in SPREAD:
            assert client.result(workflow_id, timeout=WAIT) == workflow_id
    placed = directory(cells)
    for workflow_id in SPREAD:
        home = cell_of(workflow_id)
        other = "b" if home == "a" else "a"
        assert (cells.rows(home, workflow_id), cells.rows(other, workflow_id)) == (1, 0)
        assert placed[workflow_id] == home
    assert set(map(cell_of, SPREAD)) == {"a", "b"}  # both cells hold some


def test_a_paged_list_shows_every_run_once_across_cells(cells: Cells) -> None:
    seen: Counter[str] = Counter()
    token = ""
    pages = 0
    with cells.client() as client:
        while True:
            page = client.list(page_size=5, page_token=token)
            seen.update(info.workflow_id for info in page.workflows)
            pages += 1
            token = page.next_page_token
            if not token:
                break
    assert pages >= 3
    assert set(SPREAD) <= set(seen)
    assert max(seen.values()) == 1, seen


def test_a_child_started_inside_a_cell_is_found_through_the_gateway(cells: Cells) -> None:
    parent = id_in("a", "parent")
    child = id_in("b", "child")  # hashing would put it in b; it starts in its parent's cell
    with cells.client() as client:
        client.start_workflow("cell_parent", {"child": child}, workflow_id=parent)
        assert client.result(parent, timeout=WAIT) == child
        assert client.describe(child).workflow.workflow_id == child
        assert client.result(child, timeout=WAIT) == child
    assert (cells.rows("a", child), cells.rows("b", child)) == (1, 0)
    assert directory(cells)[child] == "a"  # recorded once found


def test_approvals_and_schedules_are_found_in_their_cells_and_listed_once(cells: Cells) -> None:
    asking = [id_in(cell, f"asks-{cell}") for cell in ("a", "b")]
    with cells.client() as client:
        for workflow_id in asking:
            client.start_workflow("cell_asks", workflow_id=workflow_id)
        for workflow_id in asking:  # listed with the run's id, decided by its approval id
            assert decide_pending(cells.gateway, workflow_id).status == wf.APPROVAL_STATUS_APPROVED
            assert client.result(workflow_id, timeout=WAIT) is True
    schedules = [f"sched-{n}" for n in range(4)]
    with grpc.insecure_channel(cells.gateway) as channel:
        approvals = agrpc.ApprovalServiceStub(channel)
        listed = listed_pages(
            lambda token: approvals.ListApprovals(
                apb.ListApprovalsRequest(page_size=1, page_token=token), timeout=20
            ),
            lambda page: [approval.workflow_id for approval in page.approvals],
        )
        assert sorted(listed) == sorted(asking)
        stub = schedgrpc.ScheduleServiceStub(channel)
        for schedule_id in schedules:
            stub.CreateSchedule(
                schedpb.CreateScheduleRequest(
                    schedule=schedpb.Schedule(
                        schedule_id=schedule_id,
                        spec=schedpb.ScheduleSpec(interval=Duration(seconds=3600)),
                        action=api.StartWorkflowRequest(workflow_type="cell_echo"),
                    )
                ),
                timeout=20,
            )
        listed = listed_pages(
            lambda token: stub.ListSchedules(
                schedpb.ListSchedulesRequest(page_size=1, page_token=token), timeout=20
            ),
            lambda page: [info.schedule.schedule_id for info in page.schedules],
        )
        assert listed == schedules  # oldest first, each once
        homes = {placed(cells, "schedule", schedule_id) for schedule_id in schedules}
        assert homes == {"a", "b"}
        triggered = stub.TriggerSchedule(
            schedpb.TriggerScheduleRequest(schedule_id=schedules[0]), timeout=20
        ).action.workflow_id
        for schedule_id in schedules:
            stub.DeleteSchedule(schedpb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=20)
        # The one worker process holds a session in each cell: listed once per cell.
        workers = admingrpc.AdminServiceStub(channel).ListWorkers(
            adminpb.ListWorkersRequest(), timeout=20
        )
        assert [worker.identity for worker in workers.workers] == ["both", "both"]
    with cells.client() as client:  # started inside the schedule's cell, found from here
        assert client.result(triggered, timeout=WAIT) == triggered
    assert directory(cells)[triggered] == placed(cells, "schedule", schedules[0])


def listed_pages(call: Callable[[str], Any], items: Callable[[Any], list[str]]) -> list[str]:
    """Every item of a paged list, page by page."""
    found: list[str] = []
    token = ""
    while True:
        page = call(token)
        found += items(page)
        token = page.next_page_token
        if not token:
            return found


def placed(cells: Cells, kind: str, key: str) -> str:
    with psycopg.connect(cells.directory_dsn) as conn:
        row = conn.execute(
            "SELECT cell FROM directory.placements WHERE kind = %s AND key = %s", [kind, key]
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_a_cell_whose_history_is_down_fails_only_its_own_runs(cells: Cells) -> None:
    waiting = id_in("b", "waits")
    with cells.client() as client:
        client.start_workflow("cell_waits", workflow_id=waiting)
        client.describe(waiting)
    history_b = next(p for p in cells.cells["b"].processes if p.name == "history")
    history_b.kill()  # kill -9
    with cells.client() as client:
        for n in range(3):  # cell a goes on
            workflow_id = id_in("a", f"while-b-down-{n}")
            client.start_workflow("cell_echo", workflow_id=workflow_id)
            assert client.result(workflow_id, timeout=WAIT) == workflow_id
    with grpc.insecure_channel(cells.gateway) as channel:
        stub = apigrpc.WorkflowServiceStub(channel)
        calls: dict[str, Callable[[], object]] = {
            "describe": lambda: stub.DescribeWorkflow(
                api.DescribeWorkflowRequest(workflow_id=waiting), timeout=20
            ),
            "start": lambda: stub.StartWorkflow(
                api.StartWorkflowRequest(
                    workflow_type="cell_echo", workflow_id=id_in("b", "new-in-b")
                ),
                timeout=20,
            ),
            "list": lambda: stub.ListWorkflows(api.ListWorkflowsRequest(), timeout=20),
        }
        for name, call in calls.items():
            with pytest.raises(grpc.RpcError) as failed:
                call()
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE, name
            assert "'b'" in (failed.value.details() or ""), (name, failed.value.details())
    cells.cells["b"].start_service("history")
    with cells.client() as client:
        client.signal(waiting, "go", "back")
        assert client.result(waiting, timeout=WAIT) == "back"


def test_a_node_worker_serves_every_cell(cells: Cells, tmp_path: Path) -> None:
    node = require_node()
    first = cells.cells["a"]
    args = ["tests/e2e/node_worker.mjs", "--cells", cells.spelled(), "--task-queue", "node-cells"]
    process = first._spawn("node-cells", [*args, "--identity", "node-cells"], program=node)
    wait_connected(process, marker="node worker node-cells connected")
    ids = [id_in(cell, f"node-{cell}") for cell in ("a", "b")]
    with cells.client() as client:
        for workflow_id in ids:
            client.start_workflow("clock_reading", workflow_id=workflow_id, task_queue="node-cells")
        for workflow_id in ids:
            assert isinstance(client.result(workflow_id, timeout=WAIT), str)
    assert (cells.rows("a", ids[0]), cells.rows("b", ids[1])) == (1, 1)
    process.kill()


def test_runs_stay_in_their_cell_when_a_cell_is_added(cells: Cells, tmp_path: Path) -> None:
    three = ("a", "b", "c")
    moved = [w for w in SPREAD if cell_of(w, three) == "c"]
    assert moved  # hashing over three cells would put these in c: they stay where they are
    cells.add("c")
    cells.start_gateway(["a", "b", "c"])
    cells.start_worker("all-three", MODULE)
    with cells.client() as client:
        for workflow_id in SPREAD:
            assert client.describe(workflow_id).workflow.workflow_id == workflow_id
        fresh = id_in("c", "in-c", three)
        client.start_workflow("cell_echo", workflow_id=fresh)
        assert client.result(fresh, timeout=WAIT) == fresh
    for workflow_id in moved:
        assert cells.rows("c", workflow_id) == 0
        assert cells.rows(cell_of(workflow_id), workflow_id) == 1
    assert cells.rows("c", fresh) == 1


def test_perdure_dev_runs_two_cells_with_keys_valid_in_both(tmp_path: Path) -> None:
    with running_dev(tmp_path, "--cells", "2", "--worker-module", MODULE) as (address, _, log):
        assert "cell b" in log.read_text()
        data_dir = data_dir_of(address)
        key = (data_dir / DEV_KEY_FILE).read_text().strip()
        ids = [id_in(cell, f"dev-{cell}") for cell in ("a", "b")]
        with Client(address, api_key=key) as client:
            for workflow_id in ids:
                client.start_workflow("cell_echo", workflow_id=workflow_id)
            for workflow_id in ids:  # the worker's key works in both cells
                assert client.result(workflow_id, timeout=WAIT) == workflow_id
        dsn = psycopg.conninfo.make_conninfo(
            f"host={data_dir / 'pgdata'} user=postgres", dbname="perdure_cell_b"
        )
        with psycopg.connect(dsn) as conn:
            found = conn.execute("SELECT workflow_id FROM history.workflows").fetchall()
        assert [row[0] for row in found] == [ids[1]]
