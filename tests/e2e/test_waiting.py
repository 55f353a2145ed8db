"""Waiting is state: retries, timers, signals, suspension, cancellation, termination, queries
and heartbeats, against the real services as processes on a real PostgreSQL.

Most tests share one cluster (and its worker "main" on the default queue); each uses its own
workflow ids and ledger. Tests that need a worker of their own start it on a task queue of
their own; tests that restart every process get a cluster of their own.

Times are compared on the database clock where the platform measures them (event times, due
times); a step attempt's start time is the worker's clock, on the same host.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import psycopg
import pytest
from google.protobuf import timestamp_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.ledger import ledger_fields
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.waiting_workflows"
WAIT = 90.0  # upper bound of any wait for a workflow to get somewhere
# How late a due wake-up may reach the code: an upper bound only (it is milliseconds when the
# machine is not loaded), generous for a slow machine, and still shorter than RESTART_INTERVAL.
LATE = timedelta(seconds=4.5)
# Timestamps travel as nanoseconds and are stored as microseconds.
ROUNDING = timedelta(milliseconds=1)
# A restart must not reset a schedule: the wait is longer than LATE so that a fresh interval
# counted from the restart would show.
RESTART_INTERVAL = 6.0


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def own_worker(shared: Cluster) -> Iterator[Callable[..., Process]]:
    """Start workers of this test on the shared cluster; they are killed when it ends."""
    started: list[Process] = []

    def start(identity: str, task_queue: str, concurrency: int = 10) -> Process:
        worker = shared.start_worker(
            identity, module=MODULE, concurrency=concurrency, task_queue=task_queue
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


# -- helpers -----------------------------------------------------------------------------------


def at(stamp: timestamp_pb2.Timestamp) -> datetime:
    """A protobuf timestamp as an aware datetime."""
    return stamp.ToDatetime(tzinfo=UTC)


def of_type(events: list[wf.HistoryEvent], event_type: int) -> list[wf.HistoryEvent]:
    """The events of one type, oldest first."""
    return [e for e in events if e.event_type == event_type]


def one(events: list[wf.HistoryEvent], event_type: int, step_id: str) -> wf.HistoryEvent:
    """The only event of a type about a step."""
    found = [e for e in of_type(events, event_type) if e.step_id == step_id]
    assert len(found) == 1, found
    return found[0]


def ran(path: Path, what: str) -> list[tuple[int, int]]:
    """(attempt, pid) of every run of a step body, from the ledger."""
    return [(int(line[1]), int(line[2])) for line in ledger_fields(path) if line[0] == what]


def described_when(
    client: Client,
    workflow_id: str,
    condition: Callable[[api.DescribeWorkflowResponse], bool],
    what: str,
) -> api.DescribeWorkflowResponse:
    """Poll describe until `condition` holds; return that description."""
    seen: list[api.DescribeWorkflowResponse] = []

    def check() -> bool:
        seen[:] = [client.describe(workflow_id)]
        return condition(seen[0])

    wait_until(check, WAIT, what)
    return seen[0]


def waiting_for(
    client: Client, workflow_id: str, kind: int, name: str
) -> api.DescribeWorkflowResponse:
    """Wait until the run is suspended waiting for `kind`/`name`; return its description."""
    return described_when(
        client,
        workflow_id,
        lambda d: (
            d.workflow.status == wf.WORKFLOW_STATUS_WAITING
            and d.workflow.wait.kind == kind
            and d.workflow.wait.name == name
        ),
        f"{workflow_id} to wait for {wf.WaitKind.Name(kind)} {name}",
    )


def rejection(call: Callable[[], object]) -> grpc.RpcError:
    """Make a call that must fail; return its error."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def assert_rejected(error: grpc.RpcError, code: grpc.StatusCode, reason: str) -> None:
    """The error has the status code and ErrorInfo reason."""
    assert (error.code(), error_reason(error)) == (code, reason), error.details()


def db_now(cluster: Cluster) -> datetime:
    """The database clock."""
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


def scheduled(cluster: Cluster, workflow_id: str) -> tuple[str | None, datetime | None]:
    """The scheduler's row for a run: its lease holder and when it is due."""
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute(
            "SELECT lease_owner, run_at FROM scheduler.tasks WHERE workflow_id = %s",
            [workflow_id],
        ).fetchone()
    return (None, None) if row is None else (row[0], row[1])


def wait_for_wake_up(cluster: Cluster, workflow_id: str, due: datetime) -> None:
    """Wait until no worker holds the run and the scheduler has its wake-up at `due`: from
    then on, only the database remembers the run."""
    wait_until(
        lambda: scheduled(cluster, workflow_id) == (None, due),
        WAIT,
        f"the wake-up of {workflow_id} to be scheduled at {due}",
    )


def restart_everything(cluster: Cluster) -> None:
    """kill -9 every service and worker of the cluster, then start the services again on the
    same database (no worker yet)."""
    cluster.stop()
    cluster.start_services()


# -- 1. retries --------------------------------------------------------------------------------


def test_retries_follow_the_backoff_formula(client: Client, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    params = {
        "ledger": str(ledger),
        "succeed_on": 4,
        "initial": 0.5,
        "backoff": 2.0,
        "maximum": 1.0,
    }
    client.start_workflow("retrying", params, workflow_id="retry-formula")
    described = client.wait("retry-formula", timeout=WAIT)
    events = list(client.history("retry-formula"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result)["attempt"] == 4
    failed = of_type(events, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
    assert [(e.step_id, e.attempt, e.failure.type) for e in failed] == [
        ("fetch", n, "ConnectionError") for n in (1, 2, 3)
    ]
    completed = one(events, wf.EVENT_TYPE_STEP_COMPLETED, "fetch")
    assert completed.attempt == 4
    # min(0.5 * 2^(n-1), 1.0) after each failure, on the database clock...
    for event, delay in zip(failed, (0.5, 1.0, 1.0), strict=True):
        waited = at(event.due_time) - at(event.event_time)
        assert abs(waited - timedelta(seconds=delay)) < ROUNDING, (event.attempt, waited)
    # ... and each next attempt started at its due time, not before and not much later.
    next_starts = [at(e.start_time) for e in [*failed[1:], completed]]
    for event, started in zip(failed, next_starts, strict=True):
        due = at(event.due_time)
        assert due - ROUNDING <= started <= due + LATE, (event.attempt, due, started)
    # The run waited for each retry without a worker, and said so.
    suspended = of_type(events, wf.EVENT_TYPE_WORKFLOW_SUSPENDED)
    assert [(s.wait.kind, s.wait.name, s.wait.until) for s in suspended] == [
        (wf.WAIT_KIND_RETRY, "fetch", e.due_time) for e in failed
    ]
    assert [attempt for attempt, _ in ran(ledger, "fetch")] == [1, 2, 3, 4]
    (fetch, after) = described.steps
    assert (fetch.step_id, fetch.status, fetch.attempts) == ("fetch", wf.STEP_STATUS_COMPLETED, 4)
    assert not fetch.HasField("failure") and not fetch.HasField("next_retry_time")
    assert at(fetch.start_time) == at(failed[0].start_time)  # when the first attempt started
    assert after.status == wf.STEP_STATUS_COMPLETED and after.attempts == 1


def test_a_restart_of_every_process_keeps_the_retry_schedule(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    params = {
        "ledger": str(ledger),
        "succeed_on": 2,
        "initial": RESTART_INTERVAL,
        "backoff": 2.0,
        "maximum": 60.0,
    }
    cluster = start_cluster()
    before = cluster.start_worker("before", module=MODULE)
    with cluster.client() as client:
        client.start_workflow("retrying", params, workflow_id="retry-restart")
        waiting = waiting_for(client, "retry-restart", wf.WAIT_KIND_RETRY, "fetch")
    due = at(waiting.workflow.wait.until)
    wait_for_wake_up(cluster, "retry-restart", due)

    killed_at = db_now(cluster)
    restart_everything(cluster)
    with cluster.client() as client:
        # No worker is running: the run, its failed attempt and its retry time are all in the
        # database.
        down = client.describe("retry-restart")
        assert down.workflow.status == wf.WORKFLOW_STATUS_WAITING
        assert at(down.workflow.wait.until) == due
        assert down.steps[0].status == wf.STEP_STATUS_RETRYING
        assert at(down.steps[0].next_retry_time) == due
        after = cluster.start_worker("after", module=MODULE)
        back_at = db_now(cluster)
        described = client.wait("retry-restart", timeout=WAIT)
        events = list(client.history("retry-restart"))

    assert killed_at < due, "the restart was meant to happen during the backoff"
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    (failure,) = of_type(events, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
    assert at(failure.due_time) == due
    assert at(failure.due_time) - at(failure.event_time) == timedelta(seconds=RESTART_INTERVAL)
    retried = one(events, wf.EVENT_TYPE_STEP_COMPLETED, "fetch")
    assert retried.attempt == 2
    # At the journaled time: not before it, and not a fresh interval after the restart.
    assert due - ROUNDING <= at(retried.start_time) <= max(due, back_at) + LATE
    assert ran(ledger, "fetch") == [(1, before.popen.pid), (2, after.popen.pid)]


def test_exhausted_and_non_retryable_failures_reach_the_code_which_compensates(
    client: Client, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    client.start_workflow("gives_up", {"ledger": str(ledger)}, workflow_id="gives-up")
    described = client.wait("gives-up", timeout=WAIT)
    events = list(client.history("gives-up"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    outcome = from_payload(described.workflow.result)
    assert outcome["charge"] == ["charge", "ConnectionError", "charge: attempt 3 failed"]
    assert outcome["reserve"][:2] == ["reserve", "KeyError"]
    assert "no such item" in outcome["reserve"][2]
    # charge: the workflow's default policy (3 attempts, 0.5 s apart); reserve: one attempt.
    assert [attempt for attempt, _ in ran(ledger, "charge")] == [1, 2, 3]
    assert [attempt for attempt, _ in ran(ledger, "reserve")] == [1]
    assert len(ran(ledger, "refund")) == 1 and len(ran(ledger, "release")) == 1
    failed = of_type(events, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
    assert [(e.step_id, e.attempt) for e in failed] == [("charge", 1), ("charge", 2)]
    for event in failed:
        assert abs(at(event.due_time) - at(event.event_time) - timedelta(seconds=0.5)) < ROUNDING
    assert [(e.step_id, e.attempt) for e in of_type(events, wf.EVENT_TYPE_STEP_FAILED)] == [
        ("charge", 3),
        ("reserve", 1),
    ]
    steps = {s.step_id: s for s in described.steps}
    assert list(steps) == ["charge", "refund", "reserve", "release"]
    assert (steps["charge"].status, steps["charge"].attempts) == (wf.STEP_STATUS_FAILED, 3)
    assert steps["charge"].failure.type == "ConnectionError"
    assert (steps["reserve"].status, steps["reserve"].attempts) == (wf.STEP_STATUS_FAILED, 1)
    assert steps["reserve"].failure.type == "KeyError"
    assert steps["refund"].status == steps["release"].status == wf.STEP_STATUS_COMPLETED


def test_a_step_timeout_is_a_failed_attempt(client: Client, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    client.start_workflow("times_out", {"ledger": str(ledger)}, workflow_id="times-out")
    described = client.wait("times-out", timeout=WAIT)
    events = list(client.history("times-out"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    result = from_payload(described.workflow.result)
    assert result["slow"] == 2  # the second attempt, within its time
    assert result["stuck"][0] == "StepTimeoutError"  # every attempt timed out: StepFailedError
    failed = of_type(events, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
    assert [(e.step_id, e.attempt, e.failure.type) for e in failed] == [
        ("slow", 1, "StepTimeoutError"),
        ("stuck", 1, "StepTimeoutError"),
    ]
    final = one(events, wf.EVENT_TYPE_STEP_FAILED, "stuck")
    assert (final.attempt, final.failure.type) == (2, "StepTimeoutError")
    assert one(events, wf.EVENT_TYPE_STEP_COMPLETED, "slow").attempt == 2
    for timed_out in [*failed, final]:
        # Cut off at its 0.5 s limit, long before the body's own 120 s sleep would end.
        ran_for = at(timed_out.event_time) - at(timed_out.start_time)
        assert timedelta(seconds=0.5) - ROUNDING <= ran_for < timedelta(seconds=30), ran_for
    assert [attempt for attempt, _ in ran(ledger, "slow")] == [1, 2]
    assert [attempt for attempt, _ in ran(ledger, "stuck")] == [1, 2]


# -- 2. timers ---------------------------------------------------------------------------------


def test_a_timer_survives_a_restart_of_every_process(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    params = {"ledger": str(ledger), "seconds": RESTART_INTERVAL}
    cluster = start_cluster()
    before = cluster.start_worker("before", module=MODULE)
    with cluster.client() as client:
        client.start_workflow("napper", params, workflow_id="nap-restart")
        waiting = waiting_for(client, "nap-restart", wf.WAIT_KIND_TIMER, "$sleep")
    fire = at(waiting.workflow.wait.until)
    wait_for_wake_up(cluster, "nap-restart", fire)

    killed_at = db_now(cluster)
    restart_everything(cluster)
    with cluster.client() as client:
        down = client.describe("nap-restart")  # no worker is running
        assert down.workflow.status == wf.WORKFLOW_STATUS_WAITING
        assert (down.workflow.wait.kind, at(down.workflow.wait.until)) == (wf.WAIT_KIND_TIMER, fire)
        assert down.current_step == "$sleep"
        after = cluster.start_worker("after", module=MODULE)
        back_at = db_now(cluster)
        described = client.wait("nap-restart", timeout=WAIT)
        events = list(client.history("nap-restart"))

    assert killed_at < fire, "the restart was meant to happen while the timer ran"
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    timer = one(events, wf.EVENT_TYPE_TIMER_STARTED, "$sleep")
    assert at(timer.due_time) == fire
    assert at(timer.due_time) - at(timer.event_time) == timedelta(seconds=RESTART_INTERVAL)
    woke = one(events, wf.EVENT_TYPE_STEP_COMPLETED, "after")
    assert at(woke.event_time) >= fire  # both on the database clock
    assert fire - ROUNDING <= at(woke.start_time) <= max(fire, back_at) + LATE
    assert ran(ledger, "before") == [(1, before.popen.pid)]
    assert ran(ledger, "after") == [(1, after.popen.pid)]
    assert from_payload(described.workflow.result) == after.popen.pid


def test_sleep_until_fires_at_the_given_moment(client: Client, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    client.start_workflow("alarm", {"ledger": str(ledger), "seconds": 1.0}, workflow_id="alarm")
    described = client.wait("alarm", timeout=WAIT)
    events = list(client.history("alarm"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    result = from_payload(described.workflow.result)
    started, fire = (datetime.fromisoformat(result[k]) for k in ("started", "fire"))
    timer, past = of_type(events, wf.EVENT_TYPE_TIMER_STARTED)
    assert (timer.step_id, at(timer.due_time)) == ("$sleep", fire)
    assert (past.step_id, at(past.due_time)) == ("$sleep#2", started)
    # Only the future moment suspended the run; the past one went straight on.
    suspended = of_type(events, wf.EVENT_TYPE_WORKFLOW_SUSPENDED)
    assert suspended
    assert {(s.wait.kind, s.wait.name, at(s.wait.until)) for s in suspended} == {
        (wf.WAIT_KIND_TIMER, "$sleep", fire)
    }
    woke = one(events, wf.EVENT_TYPE_STEP_COMPLETED, "after")
    assert at(woke.event_time) >= fire
    assert fire - ROUNDING <= at(woke.start_time) <= fire + LATE
    assert len(ran(ledger, "after")) == 1


# -- 3. signals --------------------------------------------------------------------------------


def test_signals_sent_before_and_after_the_wait(client: Client) -> None:
    client.start_workflow("two_signals", None, workflow_id="two-signals")
    waiting_for(client, "two-signals", wf.WAIT_KIND_SIGNAL, "go")
    assert client.signal("two-signals", "early", {"n": 1})  # before its wait begins
    pending = client.describe("two-signals").pending_signals
    assert [(p.name, from_payload(p.payload)) for p in pending] == [("early", {"n": 1})]
    assert client.signal("two-signals", "go", "now")  # during its wait
    described = client.wait("two-signals", timeout=WAIT)
    events = list(client.history("two-signals"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result) == ["now", {"n": 1}]
    assert list(described.pending_signals) == []
    received = {e.name: e.event_id for e in of_type(events, wf.EVENT_TYPE_SIGNAL_RECEIVED)}
    consumed = of_type(events, wf.EVENT_TYPE_SIGNAL_CONSUMED)
    assert [(c.step_id, list(c.consumed_event_ids)) for c in consumed] == [
        ("$signal:go", [received["go"]]),
        ("$signal:early", [received["early"]]),
    ]
    # The run suspended only for "go": "early" was there when its wait began.
    suspended = of_type(events, wf.EVENT_TYPE_WORKFLOW_SUSPENDED)
    assert suspended and {(s.wait.kind, s.wait.name) for s in suspended} == {
        (wf.WAIT_KIND_SIGNAL, "go")
    }


def test_a_duplicate_signal_id_is_accepted_once_and_drain_takes_all(client: Client) -> None:
    client.start_workflow("steering", None, workflow_id="steering")
    waiting_for(client, "steering", wf.WAIT_KIND_SIGNAL, "go")
    assert client.signal("steering", "item", "a", signal_id="s-1") is True
    assert client.signal("steering", "item", "a, resent", signal_id="s-1") is False
    assert client.signal("steering", "item", "b") is True
    assert client.signal("steering", "item", "c", signal_id="s-2") is True
    pending = client.describe("steering").pending_signals
    assert [(p.name, p.signal_id, from_payload(p.payload)) for p in pending] == [
        ("item", "s-1", "a"),
        ("item", "", "b"),
        ("item", "s-2", "c"),
    ]
    assert client.signal("steering", "go")
    described = client.wait("steering", timeout=WAIT)
    events = list(client.history("steering"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result) == {"items": ["a", "b", "c"], "again": []}
    items = [e for e in of_type(events, wf.EVENT_TYPE_SIGNAL_RECEIVED) if e.name == "item"]
    assert [from_payload(e.payload) for e in items] == ["a", "b", "c"]  # the resend: not journaled
    drains = {e.step_id: e for e in of_type(events, wf.EVENT_TYPE_SIGNAL_CONSUMED)}
    assert list(drains["$drain:item"].consumed_event_ids) == [e.event_id for e in items]
    assert list(drains["$drain:item#2"].consumed_event_ids) == []


def test_signal_with_start_starts_when_absent_and_signals_when_present(client: Client) -> None:
    first = client.signal_with_start("collector", "collector", "item", 1, input={"v": 1})
    assert (first.started, first.accepted) == (True, True)
    second = client.signal_with_start(
        "collector", "collector", "item", 2, input={"v": "ignored"}, signal_id="second"
    )
    assert (second.started, second.accepted) == (False, True)
    again = client.signal_with_start("collector", "collector", "item", 3, signal_id="second")
    assert (again.started, again.accepted) == (False, False)  # that id was received already
    described = client.wait("collector", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result) == {"input": {"v": 1}, "items": [1, 2]}
    events = list(client.history("collector"))
    assert [e.event_type for e in events[:2]] == [
        wf.EVENT_TYPE_WORKFLOW_STARTED,
        wf.EVENT_TYPE_SIGNAL_RECEIVED,
    ]
    assert len(of_type(events, wf.EVENT_TYPE_SIGNAL_RECEIVED)) == 2
    closed = rejection(lambda: client.signal_with_start("collector", "collector", "item", 4))
    assert_rejected(closed, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_CLOSED")


def test_a_signal_wait_times_out(client: Client) -> None:
    client.start_workflow("deadline", {"timeout": 0.5}, workflow_id="deadline")
    waiting = waiting_for(client, "deadline", wf.WAIT_KIND_SIGNAL, "approve")
    assert waiting.workflow.wait.HasField("until")  # the wait's own timeout
    assert client.signal("deadline", "approve", "yes")
    described = client.wait("deadline", timeout=WAIT)
    events = list(client.history("deadline"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    result = from_payload(described.workflow.result)
    assert result["approved"] == "yes"
    assert result["escalated"].startswith("SignalTimeoutError: no signal 'escalate'")
    approve_timer = one(events, wf.EVENT_TYPE_TIMER_STARTED, "$timeout:approve")
    assert approve_timer.due_time == waiting.workflow.wait.until
    timer = one(events, wf.EVENT_TYPE_TIMER_STARTED, "$timeout:escalate")
    assert abs(at(timer.due_time) - at(timer.event_time) - timedelta(seconds=0.5)) < ROUNDING
    (timed_out,) = of_type(events, wf.EVENT_TYPE_SIGNAL_TIMED_OUT)
    assert (timed_out.name, timed_out.step_id) == ("escalate", "$signal:escalate")
    assert at(timed_out.event_time) >= at(timer.due_time)
    suspended = [
        s for s in of_type(events, wf.EVENT_TYPE_WORKFLOW_SUSPENDED) if s.wait.name == "escalate"
    ]
    assert suspended and all(s.wait.until == timer.due_time for s in suspended)


def test_signal_cancel_and_terminate_need_an_open_run(client: Client, tmp_path: Path) -> None:
    for call in (
        lambda: client.signal("nobody", "go"),
        lambda: client.cancel("nobody"),
        lambda: client.terminate("nobody"),
        lambda: client.query("nobody", "phase"),
    ):
        assert_rejected(rejection(call), grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND")

    client.start_workflow("quick", {"ledger": str(tmp_path / "ledger")}, workflow_id="closed")
    assert client.wait("closed", timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    for call in (
        lambda: client.signal("closed", "go"),
        lambda: client.signal("closed", "go", signal_id="fresh"),
        lambda: client.cancel("closed", "too late"),
        lambda: client.terminate("closed", "too late"),
    ):
        error = rejection(call)
        assert_rejected(error, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_CLOSED")
        assert "completed" in (error.details() or "")
    events = list(client.history("closed"))
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_COMPLETED  # nothing was added


# -- 4. suspension costs nothing ---------------------------------------------------------------


def test_a_waiting_run_holds_no_worker(
    client: Client, own_worker: Callable[..., Process], tmp_path: Path
) -> None:
    solo = own_worker("solo", task_queue="solo", concurrency=1)
    params = {"ledger": str(tmp_path / "ledger")}
    client.start_workflow("wait_then_record", params, workflow_id="idle-a", task_queue="solo")
    waiting_for(client, "idle-a", wf.WAIT_KIND_SIGNAL, "go")
    # The worker's only slot is free: another run goes from start to end meanwhile.
    client.start_workflow("quick", params, workflow_id="busy-b", task_queue="solo")
    busy = client.wait("busy-b", timeout=WAIT)
    assert busy.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(busy.workflow.result) == [solo.popen.pid, solo.popen.pid]
    assert client.describe("idle-a").workflow.status == wf.WORKFLOW_STATUS_WAITING

    assert client.signal("idle-a", "go")
    idle = client.wait("idle-a", timeout=WAIT)
    assert idle.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(idle.workflow.result) == solo.popen.pid


# -- 5. cancellation and termination -----------------------------------------------------------


@pytest.mark.parametrize(
    ("workflow_type", "kind", "name", "delivered_at"),
    [
        ("order", wf.WAIT_KIND_SIGNAL, "approve", "$signal:approve"),
        ("sleepy_order", wf.WAIT_KIND_TIMER, "$sleep", "$sleep:cancelled"),
    ],
    ids=["signal", "timer"],
)
def test_cancel_wakes_a_waiting_run_which_compensates(
    client: Client, tmp_path: Path, workflow_type: str, kind: int, name: str, delivered_at: str
) -> None:
    ledger = tmp_path / "ledger"
    workflow_id = f"cancel-{workflow_type}"
    # A signal wait without a timeout, or a 10-minute timer: only the cancel can end the wait.
    params = {"ledger": str(ledger), "seconds": 600}
    client.start_workflow(workflow_type, params, workflow_id=workflow_id)
    waiting_for(client, workflow_id, kind, name)
    client.cancel(workflow_id, "customer changed their mind")
    described = client.wait(workflow_id, timeout=WAIT)
    events = list(client.history(workflow_id))

    assert described.workflow.status == wf.WORKFLOW_STATUS_CANCELLED
    assert described.workflow.cancel_requested
    assert described.workflow.failure.type == "WorkflowCancelledError"
    assert "customer changed their mind" in described.workflow.failure.message
    (requested,) = of_type(events, wf.EVENT_TYPE_CANCEL_REQUESTED)
    assert requested.failure.message == "customer changed their mind"
    (delivered,) = of_type(events, wf.EVENT_TYPE_CANCELLATION_DELIVERED)
    assert at(delivered.event_time) - at(requested.event_time) < LATE  # woken at once
    after_request = [e for e in events if e.event_id > requested.event_id]
    assert [(e.event_type, e.step_id) for e in after_request] == [
        (wf.EVENT_TYPE_CANCELLATION_DELIVERED, delivered_at),  # raised at the wait
        (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, "release"),
        (wf.EVENT_TYPE_STEP_COMPLETED, "release"),
        (wf.EVENT_TYPE_WORKFLOW_CANCELLED, ""),
    ]
    assert [line[0] for line in ledger_fields(ledger)] == ["reserve", "release"]


def test_cancel_during_a_step_is_delivered_at_the_next_durable_call(
    client: Client, tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    params = {"ledger": str(ledger), "gate": str(gate)}
    client.start_workflow("order", params, workflow_id="cancel-step")
    wait_until(lambda: ran(ledger, "start-work"), WAIT, "step work to start")
    client.cancel("cancel-step", "stop")
    client.cancel("cancel-step", "stop, again")  # harmless: one request is journaled
    during = client.describe("cancel-step").workflow
    assert (during.status, during.cancel_requested) == (wf.WORKFLOW_STATUS_RUNNING, True)
    gate.touch()  # the running step finishes normally
    described = client.wait("cancel-step", timeout=WAIT)
    events = list(client.history("cancel-step"))

    assert described.workflow.status == wf.WORKFLOW_STATUS_CANCELLED
    (requested,) = of_type(events, wf.EVENT_TYPE_CANCEL_REQUESTED)
    after_request = [e for e in events if e.event_id > requested.event_id]
    assert [(e.event_type, e.step_id) for e in after_request] == [
        (wf.EVENT_TYPE_STEP_COMPLETED, "work"),
        (wf.EVENT_TYPE_CANCELLATION_DELIVERED, "$signal:approve"),
        (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, "release"),
        (wf.EVENT_TYPE_STEP_COMPLETED, "release"),
        (wf.EVENT_TYPE_WORKFLOW_CANCELLED, ""),
    ]
    assert [line[0] for line in ledger_fields(ledger)] == [
        "reserve",
        "start-work",
        "work",
        "release",
    ]
    assert {s.step_id: s.status for s in described.steps} == {
        "reserve": wf.STEP_STATUS_COMPLETED,
        "work": wf.STEP_STATUS_COMPLETED,
        "release": wf.STEP_STATUS_COMPLETED,
    }


def test_terminate_ends_a_run_at_once_and_fences_out_its_worker(
    client: Client, own_worker: Callable[..., Process], tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    worker = own_worker("terminator", task_queue="terminate", concurrency=1)
    params = {"ledger": str(ledger), "gate": str(gate)}
    client.start_workflow("order", params, workflow_id="terminated", task_queue="terminate")
    wait_until(lambda: ran(ledger, "start-work"), WAIT, "step work to start")
    client.terminate("terminated", "operator stop")
    described = client.describe("terminated")  # at once, while the worker still runs it
    assert described.workflow.status == wf.WORKFLOW_STATUS_TERMINATED
    assert described.workflow.failure.message == "operator stop"
    assert described.workflow.HasField("close_time")
    journaled = list(client.history("terminated"))

    gate.touch()  # the step finishes on the worker, which then tries to record it
    lost = re.compile(r"workflow terminated: lease with fence \d+ lost")
    wait_until(lambda: lost.search(worker.output()), WAIT, "the worker's record to be refused")
    events = list(client.history("terminated"))
    assert events == journaled  # the refused record wrote nothing
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_TERMINATED
    assert events[-1].failure.message == "operator stop"
    assert [e.step_id for e in of_type(events, wf.EVENT_TYPE_STEP_COMPLETED)] == ["reserve"]
    assert len(ran(ledger, "work")) == 1  # the body ran; its result was not journaled
    assert client.describe("terminated").workflow.status == wf.WORKFLOW_STATUS_TERMINATED
    # The worker's only slot is free again: the next run goes through at once.
    client.start_workflow("quick", params, workflow_id="after-terminate", task_queue="terminate")
    after = client.wait("after-terminate", timeout=WAIT)
    assert after.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(after.workflow.result) == [worker.popen.pid, worker.popen.pid]


# -- 6. queries --------------------------------------------------------------------------------


def test_describe_and_query_a_waiting_run_with_no_worker(
    client: Client, own_worker: Callable[..., Process], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    inspector = own_worker("inspector", task_queue="inspect")
    client.start_workflow(
        "inspected", {"ledger": str(ledger)}, workflow_id="inspect-retry", task_queue="inspect"
    )
    client.start_workflow(
        "awaiting_approval", None, workflow_id="inspect-signal", task_queue="inspect"
    )
    waiting_for(client, "inspect-retry", wf.WAIT_KIND_RETRY, "charge")
    waiting_for(client, "inspect-signal", wf.WAIT_KIND_SIGNAL, "approve")
    inspector.kill()  # the only worker of their queue: nobody runs them now
    assert client.signal("inspect-retry", "note", {"text": "call me"}, signal_id="n-1")

    retry = client.describe("inspect-retry")
    events = list(client.history("inspect-retry"))
    (failure,) = of_type(events, wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
    assert retry.workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert (retry.workflow.wait.kind, retry.workflow.wait.name) == (wf.WAIT_KIND_RETRY, "charge")
    assert retry.workflow.wait.until == failure.due_time
    assert at(failure.due_time) - at(failure.event_time) == timedelta(seconds=600)
    assert retry.current_step == "charge"
    plan, charge = retry.steps
    assert (plan.step_id, plan.status, plan.attempts) == ("plan", wf.STEP_STATUS_COMPLETED, 1)
    assert from_payload(plan.output) == inspector.popen.pid
    assert (charge.step_id, charge.status, charge.attempts) == (
        "charge",
        wf.STEP_STATUS_RETRYING,
        1,
    )
    assert (charge.failure.type, charge.failure.message) == (
        "ConnectionError",
        "charge: attempt 1 failed",
    )
    assert charge.next_retry_time == failure.due_time
    assert not charge.HasField("complete_time")
    assert [(p.name, p.signal_id, from_payload(p.payload)) for p in retry.pending_signals] == [
        ("note", "n-1", {"text": "call me"})
    ]
    assert {k: from_payload(v) for k, v in retry.state.items()} == {
        "phase": "charging",  # the latest of two values
        "progress": {"done": 1, "of": 2},
    }
    assert client.query("inspect-retry", "phase") == "charging"
    assert client.query("inspect-retry", "progress") == {"done": 1, "of": 2}
    missing = rejection(lambda: client.query("inspect-retry", "no-such-key"))
    assert_rejected(missing, grpc.StatusCode.NOT_FOUND, "STATE_NOT_FOUND")

    approval = client.describe("inspect-signal")
    timeout = one(
        list(client.history("inspect-signal")), wf.EVENT_TYPE_TIMER_STARTED, "$timeout:approve"
    )
    assert approval.workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert (approval.workflow.wait.kind, approval.workflow.wait.name) == (
        wf.WAIT_KIND_SIGNAL,
        "approve",
    )
    assert approval.workflow.wait.until == timeout.due_time
    assert approval.current_step == "approve"
    assert list(approval.steps) == [] and list(approval.pending_signals) == []
    assert client.query("inspect-signal", "phase") == "awaiting approval"


# -- 7. heartbeats -----------------------------------------------------------------------------


def test_a_killed_steps_next_attempt_resumes_from_its_last_heartbeat(
    client: Client, own_worker: Callable[..., Process], tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    first = own_worker("hb-first", task_queue="hb")
    params = {"ledger": str(ledger), "gate": str(gate), "total": 6}
    client.start_workflow("long_job", params, workflow_id="heartbeats", task_queue="hb")

    def progress_is_visible(d: api.DescribeWorkflowResponse) -> bool:
        return bool(d.steps) and from_payload(d.steps[0].heartbeat_details) == {"next": 3}

    during = described_when(client, "heartbeats", progress_is_visible, "progress in describe")
    assert during.current_step == "process"
    assert (during.steps[0].status, during.steps[0].attempts) == (wf.STEP_STATUS_RUNNING, 1)
    assert during.steps[0].HasField("heartbeat_time")
    first.kill()  # mid-step, half-way through the items
    gate.touch()
    second = own_worker("hb-second", task_queue="hb")
    described = client.wait("heartbeats", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result) == {
        "resumed_from": 3,
        "pid": second.popen.pid,
    }
    lines = ledger_fields(ledger)
    assert [(line[1], int(line[-1])) for line in lines if line[0] == "resume"] == [
        ("0", first.popen.pid),
        ("3", second.popen.pid),
    ]
    items = [(int(line[1]), int(line[2])) for line in lines if line[0] == "item"]
    assert items == [(n, first.popen.pid) for n in range(3)] + [
        (n, second.popen.pid) for n in range(3, 6)
    ]


def test_a_failed_steps_next_attempt_resumes_from_its_last_heartbeat(
    client: Client, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    params = {"ledger": str(ledger), "total": 4}
    client.start_workflow("resumes_after_failure", params, workflow_id="hb-failure")
    described = client.wait("hb-failure", timeout=WAIT)

    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result) == {"resumed_from": 2, "attempt": 2}
    lines = ledger_fields(ledger)
    assert [line[1:3] for line in lines if line[0] == "resume"] == [["0", "1"], ["2", "2"]]
    assert [int(line[1]) for line in lines if line[0] == "item"] == [0, 1, 2, 3]
