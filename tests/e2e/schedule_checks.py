"""Reading a schedule's runs from the database, and the checker that every slot between its
first and last run started exactly one run, unless it was counted as missed."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

import grpc
import psycopg

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as sgrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common.payload import json_payload

WAIT = 90.0  # seconds a condition may take (generous: a shared machine)


@dataclass(frozen=True)
class ScheduleRun:
    slot: datetime
    runs: int  # runs with the slot's workflow id (the checker wants 1)
    status: str


def schedule_runs(dsn: str, schedule_id: str) -> list[ScheduleRun]:
    """Every run whose workflow id is one of the schedule's slots, by slot."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT chain_id, count(*), max(status) FROM history.workflows "
            "WHERE chain_id LIKE %s GROUP BY chain_id ORDER BY chain_id",
            [f"{schedule_id}-%"],
        ).fetchall()
    return [
        ScheduleRun(datetime.fromisoformat(str(row[0])[len(schedule_id) + 1 :]), row[1], row[2])
        for row in rows
    ]


def schedule_row(dsn: str, schedule_id: str) -> dict[str, object]:
    """The schedule's row, with the database's now()."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "SELECT *, now() AS db_now FROM history.schedules WHERE schedule_id = %s",
            [schedule_id],
        )
        names = [column.name for column in cur.description or []]
        row = cur.fetchone()
    assert row is not None, f"no schedule {schedule_id}"
    return dict(zip(names, row, strict=True))


def assert_each_slot_once(dsn: str, schedule_id: str, interval: int) -> list[ScheduleRun]:
    """The checker: no slot has two runs, and every slot between the first run's and the
    last's has one, except slots the schedule counted as missed (older than its catch-up
    window when a replica came to them), which form gaps of exactly that many slots."""
    runs = schedule_runs(dsn, schedule_id)
    assert runs, "no run started"
    assert [r for r in runs if r.runs != 1] == [], "a slot started more than one run"
    step = timedelta(seconds=interval)
    gaps = [round((b.slot - a.slot) / step) - 1 for a, b in itertools.pairwise(runs)]
    missed = schedule_row(dsn, schedule_id)["missed_count"]
    assert sum(gaps) == missed, f"slots without a run: {sum(gaps)}, counted missed: {missed}"
    return runs


def create(
    stub: sgrpc.ScheduleServiceStub,
    schedule_id: str,
    workflow_type: str,
    *,
    interval: int = 1,
    policy: int = spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
    catchup: float | None = None,
) -> spb.ScheduleInfo:
    """Create an interval schedule through the gateway."""
    schedule = spb.Schedule(
        schedule_id=schedule_id,
        action=api.StartWorkflowRequest(workflow_type=workflow_type, input=json_payload("1")),
        overlap_policy=policy,  # type: ignore[arg-type]
    )
    schedule.spec.interval.FromSeconds(interval)
    if catchup is not None:
        schedule.catchup_window.FromMilliseconds(int(catchup * 1000))
    answer: spb.CreateScheduleResponse = stub.CreateSchedule(
        spb.CreateScheduleRequest(schedule=schedule), timeout=30
    )
    return answer.schedule


def schedules_stub(channel: grpc.Channel) -> sgrpc.ScheduleServiceStub:
    return sgrpc.ScheduleServiceStub(channel)
