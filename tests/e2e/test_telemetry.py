"""One workflow, one trace: spans and metrics from the real services, exported over OTLP to a
receiver the test runs, across a worker's kill -9."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
import requests

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from tests.e2e.blocking import WAIT, start_blocked, started
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.dev import perdure, running_dev
from tests.fixtures.otlp import OtlpReceiver, ReceivedSpan

SERVICES = {"perdure-gateway", "perdure-history", "perdure-scheduler", "perdure-worker"}
SERVER, CLIENT = 2, 3  # span kinds
ERROR = 2  # span status code
JOURNAL = "/perdure.api.worker.v1.JournalService"
MARKER = "input-value-that-must-not-leak"


def otlp_env(receiver: OtlpReceiver, **extra: str) -> dict[str, str]:
    """Every process exports to the receiver, quickly (the SDK's defaults batch for seconds)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
        **extra,
    }


def one(spans: list[ReceivedSpan], what: str) -> ReceivedSpan:
    assert len(spans) == 1, f"expected one {what}, got {len(spans)}: {spans}"
    return spans[0]


def of_workflow(spans: list[ReceivedSpan], name: str, workflow_id: str) -> list[ReceivedSpan]:
    return [
        s
        for s in spans
        if s.name == name and s.attributes.get("perdure.workflow.id") == workflow_id
    ]


def services_in_trace_of(spans: list[ReceivedSpan], workflow_id: str) -> set[str]:
    """The services with spans in the trace of the workflow's start (empty before it)."""
    traces = {s.trace_id for s in of_workflow(spans, "perdure.workflow.start", workflow_id)}
    return {s.service for s in spans if s.trace_id in traces}


def everything_of_the_crash(spans: list[ReceivedSpan]) -> bool:
    """Each process exports on its own schedule: wait for the run that completed the workflow
    (its span ends after all of its children), history's side of that, and every run's grant."""
    runs = of_workflow(spans, "perdure.task.run", "traced-1")
    ids = {s.span_id for s in spans}
    return (
        any(run.attributes.get("perdure.task.outcome") == "result" for run in runs)
        and any(s.name == f"{JOURNAL}/FinishWorkflow" and s.kind == SERVER for s in spans)
        and all(run.parent_span_id in ids for run in runs)
    )


def test_a_workflow_across_a_crash_is_one_trace(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # The killed worker's lease expires and the workflow goes over with the next fence.
    cluster = start_cluster(PERDURE_LEASE_TTL="2", **otlp_env(otlp_receiver))
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    module = "tests.e2e.traced_workflows"
    first = cluster.start_worker("first", module=module)
    with cluster.client() as client:
        params = {"ledger": str(ledger), "gate": str(gate), "marker": MARKER}
        client.start_workflow("traced", params, workflow_id="traced-1")
        wait_until(
            lambda: client.describe("traced-1").workflow.wait.kind == wf.WAIT_KIND_SIGNAL,
            WAIT,
            "the workflow to wait for its signal",
        )
        assert client.signal("traced-1", "approve", {"by": "ops"}, signal_id="approval-1")
        wait_until(lambda: started(ledger, "slow"), WAIT, "the slow step to start")
        # The killed worker's buffered spans die with it: wait until its finished runs
        # (the retry, the signal, the timer's suspension) are exported, and the timer's firing
        # (by this worker when the task was granted ahead of the timer).
        otlp_receiver.wait_for_spans(
            lambda spans: (
                {"retry", "signal"}
                <= {s.attributes["perdure.wait.kind"] for s in spans if s.name == "perdure.wait"}
                and any(s.name == "perdure.signal.consume" for s in spans)
                and any(s.attributes.get("perdure.wait.kind") == "timer" for s in spans)
                and any(
                    s.name == "perdure.timer.fire" and s.attributes["perdure.wait.kind"] == "timer"
                    for s in spans
                )
                # and the three runs that ended in a suspension (each span ends after its
                # children, so it may travel in a later batch)
                and len(
                    [
                        s
                        for s in of_workflow(spans, "perdure.task.run", "traced-1")
                        if s.attributes.get("perdure.task.outcome") == "suspend"
                    ]
                )
                >= 3
            ),
            WAIT,
            "the first worker's finished runs",
        )
        first.kill()
        gate.touch()
        second = cluster.start_worker("second", module=module)
        described = client.wait("traced-1", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED

    spans = otlp_receiver.wait_for_spans(everything_of_the_crash, WAIT, "the second worker's spans")
    by_id = {s.span_id: s for s in spans}
    start = one(of_workflow(spans, "perdure.workflow.start", "traced-1"), "start span")
    trace_id = start.trace_id
    in_trace = [s for s in spans if s.trace_id == trace_id]

    # Describe names the trace, for an operator to look it up.
    assert described.workflow.trace_id == trace_id
    # Every service took part in the one trace.
    assert {s.service for s in in_trace} >= SERVICES
    assert start.service == "perdure-gateway"
    assert (
        by_id[start.parent_span_id].name == "/perdure.api.workflow.v1.WorkflowService/StartWorkflow"
    )
    stored = one(
        [
            s
            for s in in_trace
            if s.name == "/perdure.internal.history.v1.HistoryService/StartWorkflow"
            and s.kind == SERVER
        ],
        "history StartWorkflow span",
    )
    call = by_id[stored.parent_span_id]  # the gateway's client span, within its start span
    assert call.service == "perdure-gateway" and call.kind == CLIENT
    assert call.parent_span_id == start.span_id

    # Each run is a child of a lease grant, and each grant a child of the stored start context:
    # the run after the crash, on another worker, is in the same trace.
    runs = of_workflow(spans, "perdure.task.run", "traced-1")
    assert all(run.trace_id == trace_id for run in runs)
    identities = {run.attributes["perdure.worker.identity"] for run in runs}
    assert identities == {"first", "second"}
    for run in runs:
        grant = by_id[run.parent_span_id]
        assert grant.name == "perdure.lease.grant" and grant.service == "perdure-scheduler"
        assert grant.parent_span_id == stored.span_id
        assert grant.attributes["perdure.fence"] == run.attributes["perdure.fence"]
        assert run.attributes["perdure.workflow.type"] == "traced"
        assert run.attributes["perdure.task_queue"] == "default"
    assert max(run.attributes["perdure.fence"] for run in runs) > 1

    # The step's failed attempt has error status, an exception and the retry time; the retry
    # succeeded; both are children of task runs.
    flaky = sorted(
        (s for s in in_trace if s.name == "perdure.step flaky"),
        key=lambda s: s.attributes["perdure.step.attempt"],
    )
    assert [s.attributes["perdure.step.attempt"] for s in flaky] == [1, 2]
    failed, retried = flaky
    assert failed.status_code == ERROR and "flaky fails once" in failed.status_message
    assert failed.attributes["perdure.step.outcome"] == "retrying"
    assert failed.attributes["perdure.step.next_retry_time"]
    assert any(name == "exception" for name, _ in failed.events)
    assert retried.status_code != ERROR
    assert retried.attributes["perdure.step.outcome"] == "completed"
    assert {by_id[s.parent_span_id].name for s in flaky} == {"perdure.task.run"}
    slow = [s for s in in_trace if s.name == "perdure.step slow"]
    assert any(s.attributes["perdure.step.outcome"] == "completed" for s in slow)

    # Waits and wake-ups: the retry and the timer fired (never early), the run waited.
    fired = {
        s.attributes["perdure.wait.kind"]: s for s in in_trace if s.name == "perdure.timer.fire"
    }
    assert set(fired) == {"retry", "timer"}
    assert all(s.attributes["perdure.timer.lateness_ms"] >= 0 for s in fired.values())
    suspended = {s.attributes["perdure.wait.kind"] for s in in_trace if s.name == "perdure.suspend"}
    assert suspended == {"retry", "signal", "timer"}
    # Each wait is a span from the suspension to the run that ended it, in that run.
    waits = {s.attributes["perdure.wait.kind"]: s for s in in_trace if s.name == "perdure.wait"}
    assert set(waits) == {"retry", "signal", "timer"}
    # The timer's wait ended in the run the kill cut short, whose own span died with its worker.
    assert waits["timer"].service == "perdure-worker"
    assert all(
        by_id[s.parent_span_id].name == "perdure.task.run"
        for s in (waits["retry"], waits["signal"])
    )
    assert waits["timer"].end_ns - waits["timer"].start_ns >= 200_000_000  # slept 0.2 s
    assert waits["signal"].attributes["perdure.wait.name"] == "approve"

    # The signal was received in the signaller's trace, linked to the workflow's; the span
    # that consumed it, in the workflow's trace, links back.
    received = one(spans_named(spans, "perdure.signal.receive"), "signal receive span")
    assert received.trace_id != trace_id
    assert received.attributes["perdure.signal.id"] == "approval-1"
    assert (trace_id, stored.span_id) in received.links
    consumed = one(spans_named(in_trace, "perdure.signal.consume"), "signal consume span")
    assert (received.trace_id, received.span_id) in consumed.links
    # The run kept by its worker (sticky execution) went on in the task run that resumed it.
    resumed = by_id[consumed.parent_span_id]
    assert resumed.name == "perdure.task.run"
    assert resumed.start_ns <= consumed.start_ns <= resumed.end_ns

    # gRPC client and server spans on both ends, and database spans without parameter values.
    load = [s for s in in_trace if s.name == f"{JOURNAL}/LoadJournal"]
    assert {(s.service, s.kind) for s in load} >= {
        ("perdure-worker", CLIENT),
        ("perdure-history", SERVER),
    }
    statements = [
        str(s.attributes.get("db.statement") or s.attributes.get("db.query.text"))
        for s in in_trace
        if s.service == "perdure-history" and "db.system" in s.attributes
    ]
    assert any("INSERT INTO history.workflows" in text for text in statements)
    assert not any(MARKER in str(s.attributes) for s in spans)

    # The resource names the service, its version and its instance.
    assert {"service.version", "service.instance.id"} <= set(start.resource)
    assert second.popen.poll() is None


def spans_named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def test_a_non_determinism_error_marks_the_task_run(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # The killed worker's lease expires (a broken stream leaves it standing until then).
    cluster = start_cluster(PERDURE_LEASE_TTL="2", **otlp_env(otlp_receiver))
    ledger, gate, version = tmp_path / "ledger", tmp_path / "gate", tmp_path / "version"
    version.write_text("charge")
    first = cluster.start_worker("first")
    with cluster.client() as client:
        params = {"ledger": str(ledger), "gate": str(gate), "version_file": str(version)}
        client.start_workflow("version_switch", params, workflow_id="switch-1")
        wait_until(lambda: started(ledger, "wait"), WAIT, "the blocking step to start")
        first.kill()
        version.write_text("charge_v2")  # the code changed while the workflow was in flight
        cluster.start_worker("second")
        wait_until(
            lambda: client.describe("switch-1").workflow.status == wf.WORKFLOW_STATUS_PARKED,
            WAIT,
            "the run to be parked",
        )

    spans = otlp_receiver.wait_for_spans(
        lambda spans: any(
            s.attributes.get("perdure.task.outcome") == "park"
            for s in of_workflow(spans, "perdure.task.run", "switch-1")
        ),
        WAIT,
        "the parked run's span",
    )
    parked = one(
        [
            s
            for s in of_workflow(spans, "perdure.task.run", "switch-1")
            if s.attributes.get("perdure.task.outcome") == "park"
        ],
        "parked run",
    )
    assert parked.status_code == ERROR and "NonDeterminismError" in parked.status_message
    exceptions = [attributes for name, attributes in parked.events if name == "exception"]
    assert exceptions and exceptions[0]["exception.type"] == "NonDeterminismError"


def test_a_takeover_is_traced_and_counted(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_LEASE_TTL="2", **otlp_env(otlp_receiver))
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    paused = cluster.start_worker("paused")
    with cluster.client() as client:
        start_blocked(client, "fence-1", ledger, gate)
        paused.signal(signal.SIGSTOP)  # holds its connection, stops heartbeating
        cluster.start_worker("successor")
        wait_until(lambda: len(started(ledger, "step_3")) == 2, WAIT, "the takeover")
        gate.touch()
        client.wait("fence-1", timeout=WAIT)
        paused.signal(signal.SIGCONT)
        # Resumed past its deadline, the holder stops its work first (self-fencing) or writes
        # first and is refused: either way its run's span ends in error, and it is counted.
        wait_until(
            lambda: (
                "lease with fence 1 lost" in paused.output()
                or "(fence 1): stopping its work" in paused.output()
            ),
            WAIT,
            "the stale holder to fence itself or be refused",
        )
        refused = "lease with fence 1 lost" in paused.output()

    if refused:
        otlp_receiver.wait_for_metric(
            "perdure.fence.rejections", lambda n: n >= 1, WAIT, "a stale-fence rejection"
        )
    else:
        otlp_receiver.wait_for_metric(
            "perdure.worker.leases.self_fenced", lambda n: n >= 1, WAIT, "the self-fencing"
        )
    # The expiry was counted and traced.
    expirations = otlp_receiver.wait_for_metric(
        "perdure.lease.expirations", lambda n: n >= 1, WAIT, "the expiry", "perdure-scheduler"
    )
    assert expirations == 1
    # The scheduler and the resumed worker export on their own schedules: wait for all three.
    spans = otlp_receiver.wait_for_spans(
        lambda spans: bool(
            of_workflow(spans, "perdure.lease.expire", "fence-1")
            # the first, the takeover (which records the paused attempt lost), its retry
            and len(of_workflow(spans, "perdure.lease.grant", "fence-1")) == 3
            and any(
                s.attributes["perdure.fence"] == 1 and s.status_code == ERROR
                for s in of_workflow(spans, "perdure.task.run", "fence-1")
            )
        ),
        WAIT,
        "the expiry, the takeover and the lost run",
    )
    expired = one(of_workflow(spans, "perdure.lease.expire", "fence-1"), "expiry span")
    assert expired.attributes["perdure.fence"] == 1
    takeover = one(
        [
            s
            for s in of_workflow(spans, "perdure.lease.grant", "fence-1")
            if s.attributes["perdure.lease.takeover"]
        ],
        "takeover grant",
    )
    assert takeover.attributes["perdure.fence"] == 2
    assert takeover.trace_id == expired.trace_id
    lost = [
        s
        for s in of_workflow(spans, "perdure.task.run", "fence-1")
        if s.attributes["perdure.fence"] == 1 and s.status_code == ERROR
    ]
    reason = "stale fence 1" if refused else "lease not renewed in time"
    assert lost and reason in lost[0].status_message


def test_metrics_add_up_after_a_scripted_run(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # Over OTLP/HTTP this time.
    env = otlp_env(otlp_receiver, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_receiver.http_endpoint
    cluster = start_cluster(PERDURE_STORAGE_SAMPLE_INTERVAL="0.5", **env)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cluster.start_worker("only", concurrency=1)
    with cluster.client() as client:
        for index in range(3):
            client.start_workflow("five_steps", {"ledger": str(ledger)}, workflow_id=f"ok-{index}")
            client.wait(f"ok-{index}", timeout=WAIT)
        client.start_workflow("fails", {"ledger": str(ledger)}, workflow_id="failing")
        assert client.wait("failing", timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_FAILED
        start_blocked(client, "held", ledger, gate)  # takes the worker's only slot
        for index in range(2):
            client.start_workflow("five_steps", {"ledger": str(ledger)}, workflow_id=f"q-{index}")

        # Two due tasks wait for the slot; three runs are open.
        otlp_receiver.wait_for_metric(
            "perdure.task_queue.backlog",
            lambda n: n == 2,
            WAIT,
            "a backlog of 2",
            where={"perdure.task_queue": "default"},
        )
        started_runs = otlp_receiver.wait_for_metric(
            "perdure.workflow.started", lambda n: n == 7, WAIT, "7 starts"
        )
        closed = otlp_receiver.wait_for_metric(
            "perdure.workflow.closed", lambda n: n == 4, WAIT, "4 closed runs"
        )
        assert started_runs == closed + 3  # started = completed + failed + running
        assert (
            otlp_receiver.latest(
                "perdure.workflow.closed", where={"perdure.workflow.outcome": "failed"}
            )
            == 1
        )
        assert (
            otlp_receiver.latest(
                "perdure.workflow.started", where={"perdure.workflow.type": "five_steps"}
            )
            == 5
        )

        gate.touch()
        for workflow_id in ("held", "q-0", "q-1"):
            client.wait(workflow_id, timeout=WAIT)

    completed = {"perdure.workflow.outcome": "completed"}
    otlp_receiver.wait_for_metric(
        "perdure.workflow.closed", lambda n: n == 6, WAIT, "6", where=completed
    )
    otlp_receiver.wait_for_metric(
        "perdure.task_queue.backlog", lambda n: n == 0, WAIT, "an empty backlog"
    )
    with grpc.insecure_channel(cluster.gateway) as channel:
        admingrpc.AdminServiceStub(channel).Pause(
            admin.PauseRequest(workflow_type="five_steps"), timeout=WAIT
        )
    otlp_receiver.wait_for_metric(
        "perdure.pauses",
        lambda n: n == 1,
        WAIT,
        "a pause of a workflow type",
        where={"perdure.pause.scope": "workflow_type"},
    )
    five = {"perdure.workflow.type": "five_steps", "perdure.step.outcome": "completed"}
    attempts = otlp_receiver.wait_for_metric(
        "perdure.step.attempts", lambda n: n == 25, WAIT, "25 steps of five_steps", where=five
    )
    assert otlp_receiver.latest_count("perdure.step.duration", where=five) == attempts
    failed_charge = {"perdure.step.name": "charge", "perdure.step.outcome": "failed"}
    assert otlp_receiver.latest("perdure.step.attempts", where=failed_charge) == 1
    # Other processes export on their own schedule: wait for their figures too.
    wait_until(
        lambda: otlp_receiver.latest_count("perdure.task.schedule_to_start") >= 7,
        WAIT,
        "7 grants measured",
    )
    step_writes = {"perdure.journal.operation": "step_completed"}
    wait_until(
        lambda: (
            otlp_receiver.latest_count("perdure.journal.write.duration", where=step_writes)
            >= 25 + 3 + 1
        ),
        WAIT,
        "the step writes measured",
    )
    assert otlp_receiver.latest("perdure.worker.streams", "perdure-scheduler") == 1
    # Storage: the samples' gauges (7 runs, their journals) and the records' counters.
    default = {"perdure.namespace": "default"}
    otlp_receiver.wait_for_metric(
        "perdure.storage.rows", lambda n: n == 7, WAIT, "7 runs sampled", where=default
    )
    events = otlp_receiver.wait_for_metric(
        "perdure.storage.events", lambda n: n > 7 * 2, WAIT, "their events", where=default
    )
    assert otlp_receiver.latest("perdure.storage.bytes", where=default) >= 64 * events
    assert otlp_receiver.latest("perdure.database.size") > 0
    written = otlp_receiver.wait_for_metric(
        "perdure.journal.events_written", lambda n: n >= 25, WAIT, "the records counted"
    )
    assert otlp_receiver.latest("perdure.journal.bytes_written") >= 64 * written
    assert {p.protocol for p in otlp_receiver.metric_points("perdure.workflow.started")} == {"http"}


def test_timer_lateness_is_measured(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(**otlp_env(otlp_receiver))
    cluster.start_worker("sleeper", module="tests.e2e.waiting_workflows")
    ledger = tmp_path / "ledger"
    with cluster.client() as client:
        for index in range(3):
            params = {"ledger": str(ledger), "seconds": 0.3}
            client.start_workflow("napper", params, workflow_id=f"nap-{index}")
        for index in range(3):
            client.wait(f"nap-{index}", timeout=WAIT)

    timers = {"perdure.wait.kind": "timer"}
    wait_until(
        lambda: otlp_receiver.latest_count("perdure.timer.lateness", where=timers) == 3,
        WAIT,
        "three timers measured",
    )
    assert otlp_receiver.latest("perdure.timer.lateness", where=timers) >= 0  # none early


def test_perdure_dev_sends_every_process_to_one_collector(
    otlp_receiver: OtlpReceiver, tmp_path: Path
) -> None:
    with running_dev(tmp_path, "--otlp", otlp_receiver.grpc_endpoint) as (address, dev, log):
        assert f"telemetry  traces and metrics to {otlp_receiver.grpc_endpoint}" in log.read_text()
        started_run = perdure(
            address, "start", "research_agent", "--input", '{"topic": "traces"}', "--id", "t-1"
        )
        assert started_run.returncode == 0, started_run.stderr
        spans = otlp_receiver.wait_for_spans(
            lambda spans: services_in_trace_of(spans, "t-1") >= SERVICES,
            WAIT,
            "spans from every process in the workflow's trace",
        )
    assert {s.protocol for s in spans} == {"grpc"}
    one(of_workflow(spans, "perdure.workflow.start", "t-1"), "start span")
    # Every process flushed its telemetry and stopped cleanly on SIGTERM.
    assert dev.returncode == 0
    assert "Traceback" not in log.read_text() and " ERROR " not in log.read_text()


def test_with_telemetry_off_nothing_is_exported_and_nothing_complains(
    monkeypatch: pytest.MonkeyPatch, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    cluster = start_cluster()  # the default: no OTEL_* variable at all
    cluster.start_worker("quiet", module="tests.e2e.waiting_workflows")
    ledger = tmp_path / "ledger"
    with cluster.client() as client:
        client.start_workflow("napper", {"ledger": str(ledger), "seconds": 0.1}, workflow_id="n")
        described = client.wait("n", timeout=WAIT)
        events = list(client.history("n"))
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert described.workflow.trace_id == ""

    # No trace context is stored or sent, no exporter tried the default endpoint and failed.
    assert not any(event.trace_context for event in events)
    for process in cluster.processes:
        complaints = [
            line
            for line in process.output().splitlines()
            if (" WARNING " in line and "AUTHENTICATION IS OFF" not in line)  # keys are off here
            or " ERROR " in line
            or "Traceback" in line
        ]
        assert not complaints, (process.name, complaints)


def test_a_cancel_request_links_to_the_workflow_trace(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(**otlp_env(otlp_receiver))
    cluster.start_worker("waiter", module="tests.e2e.waiting_workflows")
    with cluster.client() as client:
        client.start_workflow("two_signals", workflow_id="cancel-me")
        wait_until(
            lambda: client.describe("cancel-me").workflow.status == wf.WORKFLOW_STATUS_WAITING,
            WAIT,
            "the run to wait",
        )
        client.cancel("cancel-me", "no longer needed")
        described = client.wait("cancel-me", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_CANCELLED

    spans = otlp_receiver.wait_for_spans(
        lambda spans: bool(of_workflow(spans, "perdure.cancel.request", "cancel-me")),
        WAIT,
        "the cancel request's span",
    )
    request = one(of_workflow(spans, "perdure.cancel.request", "cancel-me"), "cancel request")
    assert request.trace_id != described.workflow.trace_id  # the caller's own trace...
    assert described.workflow.trace_id in {trace for trace, _ in request.links}  # ...linked


def test_an_http_call_is_one_trace_with_the_grpc_call_it_makes(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(**otlp_env(otlp_receiver))
    cluster.start_worker("w1")
    body = {
        "workflow_type": "five_steps",
        "workflow_id": "over-http",
        "input": {"ledger": str(tmp_path / "ledger")},
    }
    answer = requests.post(f"http://{cluster.http_address}/v1/workflows", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    start = "/perdure.api.workflow.v1.WorkflowService/StartWorkflow"

    def http_request(span: ReceivedSpan) -> bool:
        method = span.attributes.get("http.request.method", span.attributes.get("http.method"))
        return span.service == "perdure-gateway" and span.kind == SERVER and method == "POST"

    spans = otlp_receiver.wait_for_spans(
        lambda spans: (
            any(map(http_request, spans))
            and any(s.name == start and s.kind == SERVER for s in spans)
        ),
        WAIT,
        "the HTTP request's span and the gRPC call's",
    )
    request = one([s for s in spans if http_request(s)], "HTTP request span")
    client = one([s for s in spans if s.name == start and s.kind == CLIENT], "gRPC client span")
    server = one([s for s in spans if s.name == start and s.kind == SERVER], "gRPC server span")
    assert client.parent_span_id == request.span_id and server.parent_span_id == client.span_id
    assert request.trace_id == client.trace_id == server.trace_id
