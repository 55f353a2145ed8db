"""Schedules across history replicas and their deaths, on real processes: each slot starts
exactly one run whichever replica is up, a kill -9 while slots fire loses or repeats none, and
after every replica was down, the slots missed within the catch-up window start once each while
older ones are counted as missed; with keys on, schedules stay in their namespace and need an
operator to change. Waits poll the database; nothing is timed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import grpc
import pytest

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common.payload import json_payload
from tests.e2e.schedule_checks import (
    WAIT,
    assert_each_slot_once,
    create,
    schedule_row,
    schedule_runs,
    schedules_stub,
)
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.keys import make_key

MODULE = "tests.e2e.schedule_workflows"


def history_replica(cluster: Cluster, replica: int) -> Process:
    """The running process of one history replica."""
    address = cluster.address("history", replica)
    return next(
        p
        for p in cluster.processes
        if p.name == "history" and address in p.popen.args and p.popen.poll() is None  # type: ignore[operator]
    )


def runs_reach(cluster: Cluster, schedule_id: str, count: int) -> None:
    wait_until(
        lambda: len(schedule_runs(cluster.dsn, schedule_id)) >= count,
        WAIT,
        f"{count} runs of schedule {schedule_id}",
        interval=0.2,
    )


def test_two_replicas_and_a_kill_9_start_each_slot_exactly_once(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(replicas={"history": 2})
    cluster.start_worker("w", module=MODULE)
    suffix = uuid.uuid4().hex[:6]
    schedule_ids = [f"every-second-{n}-{suffix}" for n in range(3)]
    with grpc.insecure_channel(cluster.gateway) as channel:
        for schedule_id in schedule_ids:
            create(schedules_stub(channel), schedule_id, "tick", catchup=600)
    first = schedule_ids[0]
    runs_reach(cluster, first, 4)
    history_replica(cluster, 0).kill()  # kill -9 while slots fire: its transaction dies whole
    seen = len(schedule_runs(cluster.dsn, first))
    runs_reach(cluster, first, seen + 4)  # the other replica goes on alone
    cluster.start_service("history", 0)
    seen = len(schedule_runs(cluster.dsn, first))
    runs_reach(cluster, first, seen + 4)  # both again
    for schedule_id in schedule_ids:
        runs = assert_each_slot_once(cluster.dsn, schedule_id, 1)
        assert schedule_row(cluster.dsn, schedule_id)["missed_count"] == 0
        assert runs[-1].slot - runs[0].slot == timedelta(seconds=len(runs) - 1)
        assert len(runs) >= 10


def test_after_downtime_slots_within_the_catch_up_window_start_once_older_ones_are_missed(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", module=MODULE)
    schedule_id = f"catch-up-{uuid.uuid4().hex[:6]}"
    with grpc.insecure_channel(cluster.gateway) as channel:
        create(schedules_stub(channel), schedule_id, "tick", catchup=4)
    runs_reach(cluster, schedule_id, 2)
    history_replica(cluster, 0).kill()  # every replica down
    down_since = schedule_row(cluster.dsn, schedule_id)["next_fire"]

    def slots_passed() -> bool:
        row = schedule_row(cluster.dsn, schedule_id)
        return bool(row["db_now"] > row["next_fire"] + timedelta(seconds=12))  # type: ignore[operator]

    wait_until(slots_passed, WAIT, "12 slots to pass with no replica up", interval=0.2)
    cluster.start_service("history")

    def caught_up() -> bool:
        row = schedule_row(cluster.dsn, schedule_id)
        return bool(row["next_fire"] > row["db_now"])  # type: ignore[operator]

    wait_until(caught_up, WAIT, "the schedule to catch up", interval=0.2)
    runs = assert_each_slot_once(cluster.dsn, schedule_id, 1)
    missed = schedule_row(cluster.dsn, schedule_id)["missed_count"]
    assert isinstance(missed, int) and missed >= 8  # 12 s down, a 4 s window
    after = [run for run in runs if run.slot >= down_since]  # type: ignore[operator]
    # The slots within the window when the replica came back started, once each.
    assert len(after) >= 3, [run.slot for run in after]


def test_keys_hold_schedules_to_their_namespace_and_role(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(PERDURE_AUTH="on")
    alpha_worker = make_key(cluster, "alpha", "worker", "*")
    cluster.start_worker("w", module=MODULE, PERDURE_API_KEY=alpha_worker)
    operator, reader = make_key(cluster, "alpha", "operator"), make_key(cluster, "alpha", "reader")
    beta = make_key(cluster, "beta", "operator")
    with grpc.insecure_channel(cluster.gateway) as channel:
        stub = schedules_stub(channel)

        def as_key(token: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {token}"),)

        schedule = spb.Schedule(
            schedule_id="hourly",
            action=api.StartWorkflowRequest(workflow_type="tick", input=json_payload("1")),
        )
        schedule.spec.cron = "0 * * * *"
        create = spb.CreateScheduleRequest(schedule=schedule)
        with pytest.raises(grpc.RpcError) as raised:
            stub.CreateSchedule(create, timeout=30, metadata=as_key(reader))
        assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
        stub.CreateSchedule(create, timeout=30, metadata=as_key(operator))
        described = stub.DescribeSchedule(
            spb.DescribeScheduleRequest(schedule_id="hourly"), timeout=30, metadata=as_key(reader)
        )
        assert described.schedule.schedule.action.workflow_type == "tick"
        triggered = stub.TriggerSchedule(
            spb.TriggerScheduleRequest(schedule_id="hourly"), timeout=30, metadata=as_key(operator)
        )
        assert triggered.action.workflow_id.startswith("hourly-")
        # Another namespace neither sees it nor reaches it by naming it.
        listed = stub.ListSchedules(spb.ListSchedulesRequest(), timeout=30, metadata=as_key(beta))
        assert list(listed.schedules) == []
        with pytest.raises(grpc.RpcError) as raised:
            stub.DeleteSchedule(
                spb.DeleteScheduleRequest(schedule_id="hourly"), timeout=30, metadata=as_key(beta)
            )
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as raised:
            stub.DescribeSchedule(
                spb.DescribeScheduleRequest(schedule_id="hourly", namespace="alpha"),
                timeout=30,
                metadata=as_key(beta),
            )
        assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
