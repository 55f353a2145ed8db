"""Schedules through the gateway and the CLI on a real cluster: each overlap policy with a run
that stays open until it is released, pause, unpause, trigger and delete, and every validation
error with its status, over gRPC and HTTP. Waits poll the database or the API; nothing is timed."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC

import grpc
import pytest
import requests

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as sgrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.common.payload import json_payload
from tests.e2e.schedule_checks import WAIT, create, schedule_row, schedule_runs
from tests.fixtures.cluster import REPO_ROOT, Cluster, wait_until
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.schedule_workflows"


@pytest.fixture
def stub(shared: Cluster) -> Iterator[sgrpc.ScheduleServiceStub]:
    with grpc.insecure_channel(shared.gateway) as channel:
        yield sgrpc.ScheduleServiceStub(channel)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def statuses(cluster: Cluster, schedule_id: str) -> list[str]:
    return [run.status for run in schedule_runs(cluster.dsn, schedule_id)]


def counted(cluster: Cluster, schedule_id: str, column: str, at_least: int) -> None:
    wait_until(
        lambda: schedule_row(cluster.dsn, schedule_id)[column] >= at_least,  # type: ignore[operator]
        WAIT,
        f"{column} of {schedule_id} to reach {at_least}",
        interval=0.2,
    )


def release(client: Client, cluster: Cluster, schedule_id: str, index: int) -> str:
    """Signal the schedule's index-th run to end; its workflow id."""
    run = schedule_runs(cluster.dsn, schedule_id)[index]
    workflow_id = f"{schedule_id}-{run.slot.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    client.signal(workflow_id, "release", None)
    return workflow_id


def test_skip_starts_nothing_while_a_run_is_open(
    shared: Cluster, client: Client, stub: sgrpc.ScheduleServiceStub
) -> None:
    schedule_id = new_id("skip")
    create(stub, schedule_id, "held", policy=spb.SCHEDULE_OVERLAP_POLICY_SKIP)
    wait_until(lambda: statuses(shared, schedule_id), WAIT, "the first run")
    counted(shared, schedule_id, "skipped_count", 3)
    assert len(statuses(shared, schedule_id)) == 1
    release(client, shared, schedule_id, 0)
    wait_until(lambda: len(statuses(shared, schedule_id)) == 2, WAIT, "a run after the close")
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=30)


def test_buffer_one_starts_exactly_one_slot_once_the_open_run_closes(
    shared: Cluster, client: Client, stub: sgrpc.ScheduleServiceStub
) -> None:
    schedule_id = new_id("buffer")
    create(stub, schedule_id, "held", policy=spb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE)
    counted(shared, schedule_id, "skipped_count", 2)  # one slot waits, later ones are skipped
    info = stub.DescribeSchedule(spb.DescribeScheduleRequest(schedule_id=schedule_id), timeout=30)
    buffered = info.schedule.buffered_slot_time.ToDatetime(tzinfo=UTC)
    assert len(statuses(shared, schedule_id)) == 1
    stub.PauseSchedule(spb.PauseScheduleRequest(schedule_id=schedule_id), timeout=30)
    release(client, shared, schedule_id, 0)
    # Paused, the buffered slot waits; unpaused, it starts: exactly one run more.
    stub.UnpauseSchedule(spb.UnpauseScheduleRequest(schedule_id=schedule_id), timeout=30)
    wait_until(lambda: len(statuses(shared, schedule_id)) == 2, WAIT, "the buffered slot")
    assert schedule_runs(shared.dsn, schedule_id)[1].slot == buffered
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=30)


def test_allow_all_starts_every_slot_beside_the_open_ones(
    shared: Cluster, stub: sgrpc.ScheduleServiceStub
) -> None:
    schedule_id = new_id("all")
    create(stub, schedule_id, "held", policy=spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL)
    wait_until(lambda: len(statuses(shared, schedule_id)) >= 3, WAIT, "three open runs")
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=30)
    assert len(statuses(shared, schedule_id)) >= 3  # its runs stay


def test_cancel_other_cancels_the_open_run_then_starts_the_slot(
    shared: Cluster, stub: sgrpc.ScheduleServiceStub
) -> None:
    schedule_id = new_id("cancel")
    create(stub, schedule_id, "held", policy=spb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER)
    wait_until(
        lambda: (
            statuses(shared, schedule_id)[:1] == ["CANCELLED"]
            and len(statuses(shared, schedule_id)) >= 2
        ),
        WAIT,
        "the first run cancelled and the next started",
    )
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=30)


def test_pause_trigger_describe_list_and_delete_through_the_gateway(
    shared: Cluster, stub: sgrpc.ScheduleServiceStub
) -> None:
    schedule_id = new_id("api")
    created = create(stub, schedule_id, "tick", interval=3600)
    assert len(created.next_fire_times) == 5 and created.schedule.action.task_queue == "default"
    stub.PauseSchedule(spb.PauseScheduleRequest(schedule_id=schedule_id, note="why"), timeout=30)
    triggered = stub.TriggerSchedule(
        spb.TriggerScheduleRequest(schedule_id=schedule_id), timeout=30
    ).action
    assert triggered.triggered and triggered.workflow_id.startswith(f"{schedule_id}-")
    with Client(shared.gateway) as client:
        assert client.describe(triggered.workflow_id).workflow.run_id == triggered.run_id
    info = stub.DescribeSchedule(
        spb.DescribeScheduleRequest(schedule_id=schedule_id), timeout=30
    ).schedule
    assert (info.schedule.paused, info.schedule.note, info.action_count) == (True, "why", 1)
    assert [a.workflow_id for a in info.recent_actions] == [triggered.workflow_id]
    listed = stub.ListSchedules(spb.ListSchedulesRequest(), timeout=30).schedules
    assert schedule_id in [s.schedule.schedule_id for s in listed]
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule_id), timeout=30)
    with pytest.raises(grpc.RpcError) as raised:
        stub.DescribeSchedule(spb.DescribeScheduleRequest(schedule_id=schedule_id), timeout=30)
    assert (raised.value.code(), error_reason(raised.value)) == (
        grpc.StatusCode.NOT_FOUND,
        "SCHEDULE_NOT_FOUND",
    )


def _schedule(**fields: object) -> spb.Schedule:
    made = spb.Schedule(
        schedule_id=new_id("bad"),
        action=api.StartWorkflowRequest(workflow_type="tick", input=json_payload("1")),
    )
    made.spec.interval.FromSeconds(60)
    for name, value in fields.items():
        if name == "cron":
            made.spec.ClearField("interval")
            made.spec.cron = str(value)
        elif name == "interval":
            made.spec.interval.FromSeconds(int(value))  # type: ignore[call-overload]
        elif name == "workflow_type":
            made.action.workflow_type = str(value)
        elif name == "workflow_id":
            made.action.workflow_id = str(value)
        else:
            setattr(made, name, value)
    return made


@pytest.mark.parametrize(
    ("fields", "code", "says"),
    [
        ({"cron": "61 * * * *"}, grpc.StatusCode.INVALID_ARGUMENT, "not a valid cron"),
        ({"cron": "* * * *"}, grpc.StatusCode.INVALID_ARGUMENT, "has 4 fields"),
        ({"interval": 0}, grpc.StatusCode.INVALID_ARGUMENT, "spec.interval"),
        ({"interval": -3}, grpc.StatusCode.INVALID_ARGUMENT, "spec.interval"),
        ({"overlap_policy": 9}, grpc.StatusCode.INVALID_ARGUMENT, "not a known"),
        ({"schedule_id": "x" * 201}, grpc.StatusCode.INVALID_ARGUMENT, "limit is 200"),
        ({"schedule_id": "a\x07b"}, grpc.StatusCode.INVALID_ARGUMENT, "printable"),
        ({"schedule_id": ""}, grpc.StatusCode.INVALID_ARGUMENT, "schedule_id is required"),
        ({"workflow_type": "1bad"}, grpc.StatusCode.INVALID_ARGUMENT, "action: workflow_type"),
        ({"workflow_id": "mine"}, grpc.StatusCode.INVALID_ARGUMENT, "action.workflow_id"),
        ({"workflow_type": "nobody_serves_it"}, grpc.StatusCode.NOT_FOUND, "not registered"),
    ],
)
def test_a_bad_schedule_is_refused_with_a_precise_status(
    stub: sgrpc.ScheduleServiceStub, fields: dict[str, object], code: grpc.StatusCode, says: str
) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        stub.CreateSchedule(spb.CreateScheduleRequest(schedule=_schedule(**fields)), timeout=30)
    assert raised.value.code() == code
    assert says in (raised.value.details() or "")


def test_a_duplicate_id_is_already_exists_and_unknown_ids_not_found(
    stub: sgrpc.ScheduleServiceStub,
) -> None:
    schedule = _schedule()
    stub.CreateSchedule(spb.CreateScheduleRequest(schedule=schedule), timeout=30)
    with pytest.raises(grpc.RpcError) as raised:
        stub.CreateSchedule(spb.CreateScheduleRequest(schedule=schedule), timeout=30)
    assert (raised.value.code(), error_reason(raised.value)) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "SCHEDULE_ID_CONFLICT",
    )
    stub.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=schedule.schedule_id), timeout=30)
    for call, request in (
        (stub.PauseSchedule, spb.PauseScheduleRequest(schedule_id="nope")),
        (stub.UnpauseSchedule, spb.UnpauseScheduleRequest(schedule_id="nope")),
        (stub.TriggerSchedule, spb.TriggerScheduleRequest(schedule_id="nope")),
        (stub.DeleteSchedule, spb.DeleteScheduleRequest(schedule_id="nope")),
    ):
        with pytest.raises(grpc.RpcError) as raised:
            call(request, timeout=30)
        assert (raised.value.code(), error_reason(raised.value)) == (
            grpc.StatusCode.NOT_FOUND,
            "SCHEDULE_NOT_FOUND",
        )


def perdure(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perdure.cli", "schedule", *args, "--address", cluster.gateway],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_creates_pauses_triggers_lists_and_deletes(shared: Cluster) -> None:
    schedule_id = new_id("cli")
    made = perdure(
        shared, "create", schedule_id, "tick", "--cron", "0 9 * * 1-5", "--input", '{"n": 1}'
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["schedule"]["spec"]["cron"] == "0 9 * * 1-5"
    assert perdure(shared, "pause", schedule_id, "--note", "quiet").stdout.strip() == (
        f"{schedule_id}: paused"
    )
    triggered = perdure(shared, "trigger", schedule_id)
    assert triggered.returncode == 0 and f"started {schedule_id}-" in triggered.stdout
    described = json.loads(perdure(shared, "describe", schedule_id).stdout)
    assert described["schedule"]["paused"] and described["action_count"] == "1"
    listing = perdure(shared, "list")
    assert schedule_id in listing.stdout and "cron 0 9 * * 1-5" in listing.stdout
    assert perdure(shared, "unpause", schedule_id).returncode == 0
    assert perdure(shared, "delete", schedule_id).stdout.strip() == f"{schedule_id}: deleted"
    gone = perdure(shared, "describe", schedule_id)
    assert gone.returncode != 0 and "SCHEDULE_NOT_FOUND" in gone.stderr
    bad = perdure(shared, "create", new_id("cli"), "tick", "--every", "0")
    assert bad.returncode != 0 and "spec.interval must be" in bad.stderr


def test_the_http_routes_answer_with_the_statuses_of_their_errors(shared: Cluster) -> None:
    base = f"http://{shared.http_address}/v1/schedules"
    schedule_id = new_id("http")
    body = {
        "schedule": {
            "schedule_id": schedule_id,
            "spec": {"interval": "3600s", "offset": "60s"},
            "action": {"workflow_type": "tick", "input": {"n": 2**64 + 1}},
        }
    }
    made = requests.post(base, json=body, timeout=30)
    assert made.status_code == 200, made.text
    assert '"input":{"n":18446744073709551617}' in made.text  # the payload kept exactly
    again = requests.post(base, json=body, timeout=30)
    assert (again.status_code, again.json()["error"]["reason"]) == (409, "SCHEDULE_ID_CONFLICT")
    body["schedule"]["spec"] = {"cron": "* * *"}
    bad = requests.post(base, json=body, timeout=30)
    assert bad.status_code == 400 and "has 3 fields" in bad.json()["error"]["message"]
    paused = requests.post(f"{base}/{schedule_id}/pause", json={"note": "n"}, timeout=30)
    assert paused.status_code == 200
    listed = requests.get(base, timeout=30).json()["schedules"]
    assert any(s["schedule"]["schedule_id"] == schedule_id for s in listed)
    assert requests.post(f"{base}/{schedule_id}/delete", timeout=30).status_code == 200
    gone = requests.post(f"{base}/{schedule_id}/trigger", timeout=30)
    assert (gone.status_code, gone.json()["error"]["reason"]) == (404, "SCHEDULE_NOT_FOUND")
