"""The research agent example on real processes: approval, rejection, a step retried on the
durable schedule, a crash right after the notification, a worker killed while a step streams
its text, and the `make demo` walk-through."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from examples.research_agent import (
    STEPS,
    AgentInput,
    count_delivered,
    delivered_notifications,
    notifications,
)
from examples.research_agent.model import OfflineModel, tokens
from examples.research_agent.notifications import reservation_state
from examples.research_agent.workflow import CRASH_AFTER_TOKENS, CRASH_EXIT_CODE, RETRY
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client, Frame, StreamText
from perdure.worker._payload import from_payload
from tests.fixtures.approvals import decide_pending
from tests.fixtures.cluster import REPO_ROOT, Cluster, wait_until

MODULE = "examples.research_agent"
SHARED_WORKER = "agent-1"
SHARED_ENV = {"PERDURE_EXAMPLE_DB": "{workdir}/research_agent.sqlite3"}
BEFORE_APPROVAL = list(STEPS[:5])


@pytest.fixture
def agent(shared: Cluster) -> tuple[Cluster, Path]:
    """The module's cluster with one worker serving the example, and the example's SQLite
    database (each test's runs have ids of their own)."""
    return shared, shared.workdir / "research_agent.sqlite3"


@pytest.fixture
def own_agent(start_cluster: Callable[..., Cluster], tmp_path: Path) -> tuple[Cluster, Path]:
    """A cluster of the test's own with one worker serving the example (the test kills it), and
    the example's SQLite database."""
    database = tmp_path / "research_agent.sqlite3"
    running = start_cluster(PERDURE_EXAMPLE_DB=str(database))
    running.start_worker("agent-1", module="examples.research_agent")
    return running, database


def state(described: api.DescribeWorkflowResponse) -> dict[str, Any]:
    """What the run published with ctx.set_state."""
    return {key: from_payload(value) for key, value in described.state.items()}


def step_ids(described: api.DescribeWorkflowResponse) -> list[str]:
    return [step.step_id for step in described.steps]


def outputs(described: api.DescribeWorkflowResponse) -> dict[str, Any]:
    return {step.step_id: from_payload(step.output) for step in described.steps}


def events(client: Client, workflow_id: str, event_type: int) -> list[wf.HistoryEvent]:
    return [e for e in client.history(workflow_id) if e.event_type == event_type]


def wait_for_approval(client: Client, workflow_id: str) -> api.DescribeWorkflowResponse:
    """Wait until the run is suspended on its approval; return its description."""
    described = client.describe(workflow_id)

    def waiting() -> bool:
        nonlocal described
        described = client.describe(workflow_id)
        assert described.workflow.status != wf.WORKFLOW_STATUS_FAILED, described.workflow
        return (
            described.workflow.status == wf.WORKFLOW_STATUS_WAITING
            and described.workflow.wait.kind == wf.WAIT_KIND_APPROVAL
            and state(described).get("phase") == "awaiting_approval"
        )

    wait_until(waiting, 60, f"{workflow_id} to wait for its approval")
    return described


def approve(
    cluster: Cluster, workflow_id: str, decision: str = "approved", comment: str = ""
) -> None:
    """Decide the run's approval record once it has asked for it."""
    decide_pending(cluster.gateway, workflow_id, decision == "approved", comment)


def stream_text(frames: list[Frame]) -> StreamText:
    """The text a reader shows after these frames."""
    text = StreamText()
    for frame in frames:
        text.add(frame)
    return text


def test_the_agent_waits_for_approval_then_reports_and_notifies_once(
    agent: tuple[Cluster, Path],
) -> None:
    cluster, database = agent
    with cluster.client() as client:
        client.start_workflow("research_agent", {"topic": "fencing"}, workflow_id="ra-ok")
        waiting = wait_for_approval(client, "ra-ok")
        assert waiting.workflow.wait.name == "$approval:recommendation"
        assert step_ids(waiting) == BEFORE_APPROVAL
        published = state(waiting)
        assert published["recommendation"] == outputs(waiting)["recommend"]
        assert published["waiting_for"]["approval"] == "recommendation"
        assert "perdure approve ra-ok" in published["waiting_for"]["how"]
        assert client.query("ra-ok", "phase") == "awaiting_approval"
        assert count_delivered("ra-ok", database) == 0
        # The approval shows what it approves: the recommendation.
        (asked,) = waiting.pending_approvals
        assert from_payload(asked.details) == {
            "topic": "fencing",
            "recommendation": published["recommendation"],
        }

        # The old way, a signal named "approval", decides nothing: the run waits on.
        client.signal("ra-ok", "approval", {"decision": "approved"})
        wait_until(
            lambda: (
                client.describe("ra-ok").workflow.status == wf.WORKFLOW_STATUS_WAITING
                and any(
                    e.event_type == wf.EVENT_TYPE_WORKFLOW_SUSPENDED
                    and e.event_id
                    > events(client, "ra-ok", wf.EVENT_TYPE_SIGNAL_RECEIVED)[0].event_id
                    for e in client.history("ra-ok")
                )
            ),
            30,
            "the run to wait again",
        )

        approve(cluster, "ra-ok", comment="ship it")
        done = client.wait("ra-ok", timeout=60)
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    assert step_ids(done) == list(STEPS)
    result = from_payload(done.workflow.result)
    assert result["topic"] == "fencing"
    assert (result["decision"], result["comment"]) == ("approved", "ship it")
    assert result["recommendation"] == outputs(done)["recommend"]
    assert "Approver's comment: ship it" in result["report"]["body"]
    assert result["notification"]["delivery"] == "sent"
    assert state(done)["phase"] == "done"
    assert state(done)["approval"] == {
        "decision": "approved",
        "comment": "ship it",
        "decided_by": "anonymous",
    }
    (sent,) = delivered_notifications("ra-ok", database)
    assert sent.idempotency_key == "ra-ok:notify"
    assert sent.subject == result["report"]["title"]
    assert sent.message_id == result["notification"]["message_id"]
    assert reservation_state("ra-ok:notify", database) == "sent"
    # analyze and report streamed their text, token by token, as their results hold it.
    with cluster.client() as client:
        frames = list(client.stream("ra-ok"))
    text = stream_text(frames)
    assert list(text.chunks) == ["analyze", "report"] and text.resets == []
    assert text.step("analyze") == outputs(done)["analyze"]["summary"]
    assert text.step("report") == result["report"]["body"]
    assert [f.data for f in frames if f.step_id == "report"] == tokens(result["report"]["body"])


def test_a_rejection_returns_the_recommendation_without_report_or_notification(
    agent: tuple[Cluster, Path],
) -> None:
    cluster, database = agent
    with cluster.client() as client:
        client.start_workflow("research_agent", {"topic": "queues"}, workflow_id="ra-no")
        # Decided as soon as the run asks.
        approve(cluster, "ra-no", "rejected", "not convincing")
        done = client.wait("ra-no", timeout=60)
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    assert step_ids(done) == BEFORE_APPROVAL
    assert from_payload(done.workflow.result) == {
        "topic": "queues",
        "decision": "rejected",
        "comment": "not convincing",
        "recommendation": outputs(done)["recommend"],
    }
    assert state(done)["phase"] == "rejected"
    assert count_delivered("ra-no", database) == 0
    assert reservation_state("ra-no:notify", database) is None


def test_cancelling_a_run_waiting_for_approval_publishes_it(agent: tuple[Cluster, Path]) -> None:
    cluster, database = agent
    with cluster.client() as client:
        client.start_workflow("research_agent", {"topic": "x"}, workflow_id="ra-cancel")
        wait_for_approval(client, "ra-cancel")
        client.cancel("ra-cancel", "no longer needed")
        done = client.wait("ra-cancel", timeout=60)
    assert done.workflow.status == wf.WORKFLOW_STATUS_CANCELLED, done.workflow
    assert "no longer needed" in done.workflow.failure.message
    assert state(done)["phase"] == "cancelled"
    assert count_delivered("ra-cancel", database) == 0


def test_fail_step_once_is_retried_on_the_durable_schedule(agent: tuple[Cluster, Path]) -> None:
    cluster, database = agent
    started = subprocess.run(
        [
            *(sys.executable, "-m", "examples.research_agent", "start"),
            *("--topic", "retries", "--id", "ra-retry", "--fail-step-once", "research_1"),
            *("--address", cluster.gateway),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    assert '"started": true' in started.stdout
    with cluster.client() as client:
        approve(cluster, "ra-retry")
        done = client.wait("ra-retry", timeout=60)
        (failed,) = events(client, "ra-retry", wf.EVENT_TYPE_STEP_ATTEMPT_FAILED)
        suspended = events(client, "ra-retry", wf.EVENT_TYPE_WORKFLOW_SUSPENDED)
        completed = {e.step_id: e for e in events(client, "ra-retry", wf.EVENT_TYPE_STEP_COMPLETED)}
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    assert (failed.step_id, failed.attempt) == ("research_1", 1)
    assert failed.failure.type == "TemporaryProviderError"
    assert "fail_step_once=research_1" in failed.failure.message
    failed_at, retry_at = failed.event_time.ToDatetime(), failed.due_time.ToDatetime()
    assert 0.9 * RETRY.delay(1) <= (retry_at - failed_at).total_seconds() <= RETRY.delay(1) + 0.5
    # The wait was journaled: the worker let go of the run until the retry was due.
    assert any(e.wait.kind == wf.WAIT_KIND_RETRY and e.wait.name == "research_1" for e in suspended)
    assert completed["research_1"].attempt == 2
    assert completed["research_1"].event_time.ToDatetime() >= retry_at
    assert {s.step_id: s.attempts for s in done.steps} == {
        s: 2 if s == "research_1" else 1 for s in STEPS
    }
    assert count_delivered("ra-retry", database) == 1


def test_crash_after_notification_delivers_exactly_one_notification(
    own_agent: tuple[Cluster, Path],
) -> None:
    cluster, database = own_agent
    (first,) = [p for p in cluster.processes if p.name.startswith("worker-")]
    with cluster.client() as client:
        client.start_workflow(
            "research_agent",
            {"topic": "mail", "crash_after_notification": True},
            workflow_id="ra-crash",
        )
        approve(cluster, "ra-crash")
        # The worker sends, marks the reservation sent, and dies before recording the step.
        assert first.popen.wait(timeout=60) == CRASH_EXIT_CODE, first.output()
        assert "crash_after_notification: message" in first.output()
        assert count_delivered("ra-crash", database) == 1
        assert reservation_state("ra-crash:notify", database) == "sent"
        described = client.describe("ra-crash")
        assert described.workflow.status == wf.WORKFLOW_STATUS_RUNNING
        assert "notify" not in step_ids(described)

        second = cluster.start_worker("agent-2", module="examples.research_agent")
        done = client.wait("ra-crash", timeout=60)
        notify_records = [
            e
            for e in events(client, "ra-crash", wf.EVENT_TYPE_STEP_COMPLETED)
            if e.step_id == "notify"
        ]
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    assert len(notify_records) == 1
    notification = from_payload(done.workflow.result)["notification"]
    assert notification["delivery"].startswith("already sent: the reservation was 'sent'")
    assert count_delivered("ra-crash", database) == 1
    assert "Skipping completed step: report" in second.output()
    assert "crash_after_notification" not in second.output()
    assert second.popen.poll() is None


def test_a_worker_killed_mid_stream_leaves_a_reset_and_readers_rebuild_the_final_text(
    own_agent: tuple[Cluster, Path],
) -> None:
    cluster, _ = own_agent
    (first,) = [p for p in cluster.processes if p.name.startswith("worker-")]
    live: list[Frame] = []
    with cluster.client() as client:
        client.start_workflow(
            "research_agent",
            {"topic": "streams", "crash_mid_stream": "analyze"},
            workflow_id="ra-stream",
        )
        # A reader follows the stream from the start, through the crash, to the run's end.
        reader = threading.Thread(target=lambda: live.extend(client.stream("ra-stream")))
        reader.start()
        assert first.popen.wait(timeout=60) == CRASH_EXIT_CODE, first.output()
        assert f"crash_mid_stream: analyze streamed {CRASH_AFTER_TOKENS} tokens" in first.output()
        cluster.start_worker("agent-2", module="examples.research_agent")
        approve(cluster, "ra-stream", comment="streamed")  # once the run asks for it
        done = client.wait("ra-stream", timeout=60)
        reader.join(timeout=60)
        assert not reader.is_alive(), "the live reader did not end with the run"
        # A reader that stops halfway resumes after the last frame it saw.
        after_close = list(client.stream("ra-stream"))
        half = len(after_close) // 2
        resumed = [*after_close[:half], *client.stream("ra-stream", after_seq=half)]
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, done.workflow.failure
    assert {s.step_id: s.attempts for s in done.steps}["analyze"] == 2
    # Every frame once, in order, the same for every reader.
    assert [f.seq for f in live] == list(range(1, len(live) + 1))
    assert live == after_close == resumed
    (reset,) = [f for f in live if f.reset]
    assert (reset.step_id, reset.attempt) == ("analyze", 1)
    summary = outputs(done)["analyze"]["summary"]
    first_attempt = [f for f in live if f.step_id == "analyze" and f.attempt == 1 and not f.reset]
    assert [f.data for f in first_attempt] == tokens(summary)[:CRASH_AFTER_TOKENS]
    assert all(f.seq < reset.seq for f in first_attempt)
    retried = [f for f in live if f.step_id == "analyze" and f.attempt == 2]
    assert retried and all(f.seq > reset.seq for f in retried)
    # The text a reader shows is the final attempt's: what the step returned, nothing twice.
    text = stream_text(live)
    assert text.step("analyze") == summary
    assert text.step("report") == from_payload(done.workflow.result)["report"]["body"]


def test_an_invalid_input_fails_the_run_with_a_clear_error(agent: tuple[Cluster, Path]) -> None:
    cluster, _ = agent
    with cluster.client() as client:
        client.start_workflow(
            "research_agent",
            {"topic": "x", "fail_step_once": "approval"},
            workflow_id="ra-bad",
        )
        done = client.wait("ra-bad", timeout=60)
    assert done.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert done.workflow.failure.type == "ValueError"
    assert "fail_step_once must be one of create_plan" in done.workflow.failure.message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"topic": "x", "slow_step": "nope", "slow_seconds": 1}, "slow_step must be one of"),
        ({"topic": "x", "slow_step": "analyze"}, "needs slow_seconds > 0"),
        ({"topic": "x", "slow_seconds": -1}, "slow_seconds must be a number"),
        ({"topic": "x", "crash_after_notification": "yes"}, "must be true or false"),
        ({"topic": "x", "crash_mid_stream": "notify"}, "crash_mid_stream must be one of analyze"),
        ({"topic": ""}, "topic must be a non-empty string"),
        ({"topic": "x", "slow": 3}, "unknown input field(s) slow"),
        ("durable agents", "must be a JSON object"),
    ],
)
def test_the_input_is_validated(raw: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        AgentInput.parse(raw)


@pytest.mark.parametrize("text", ["", "one", "  lead and trail  ", "# Title\n\n- a item\nend."])
def test_the_model_streams_a_text_as_tokens_that_join_back_to_it(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERDURE_EXAMPLE_TOKEN_DELAY", "0")
    streamed = list(OfflineModel().stream(text))
    assert "".join(streamed) == text
    assert all(token.strip() or not text.strip() for token in streamed[1:])  # no blank tokens
    monkeypatch.setenv("PERDURE_EXAMPLE_TOKEN_DELAY", "-1")
    with pytest.raises(ValueError, match="PERDURE_EXAMPLE_TOKEN_DELAY must be from 0 to 10"):
        list(OfflineModel().stream(text))


def test_the_start_command_rejects_an_unknown_step_before_calling_the_gateway() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "examples.research_agent", "start", "--topic", "x"),
            *("--fail-step-once", "nope", "--address", "127.0.0.1:1"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "fail_step_once must be one of" in done.stderr


def test_a_send_interrupted_before_mark_sent_is_not_delivered_twice(tmp_path: Path) -> None:
    """The crash between the provider's send and mark-sent: the reservation stays `reserved`;
    the replay sends again with the same key and the provider drops the duplicate."""
    database = tmp_path / "notifications.sqlite3"
    message = {"recipient": "r@example.com", "subject": "s", "body": "b"}
    key, workflow_id = "w-1:notify", "w-1"
    with notifications._connect(database) as conn:  # the first attempt, up to its crash
        notifications._reserve(conn, key, workflow_id, fence=1)
        first_id, sent = notifications._provider_send(conn, key, workflow_id, **message)
    assert sent and reservation_state(key, database) == "reserved"

    replay = notifications.send_once(
        idempotency_key=key, workflow_id=workflow_id, fence=2, path=database, **message
    )
    assert (replay.message_id, replay.sent_now, replay.found) == (first_id, False, "reserved")
    assert reservation_state(key, database) == "sent"
    again = notifications.send_once(
        idempotency_key=key, workflow_id=workflow_id, fence=2, path=database, **message
    )
    assert (again.message_id, again.sent_now, again.found) == (first_id, False, "sent")
    assert count_delivered(workflow_id, database) == 1
    with pytest.raises(notifications.StaleFenceError):  # a worker fenced out by fence 2
        notifications.send_once(
            idempotency_key=key, workflow_id=workflow_id, fence=1, path=database, **message
        )


@pytest.mark.timeout(420)
def test_the_demo_runs_end_to_end_and_every_phase_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.research_agent.demo"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        # Every phase as `make demo` runs it; its kills wait for a 3 s lease, not 10 s, and
        # its model streams unpaced.
        env={**os.environ, "PERDURE_LEASE_TTL": "3", "PERDURE_EXAMPLE_TOKEN_DELAY": "0"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.split("== Summary ==", 1)[1]
    for number in range(1, 9):
        assert re.search(rf"^  PASS  phase {number}: ", summary, re.MULTILINE), summary
    assert "FAIL" not in summary
    # The budget's phase: the model call that did not fit was refused, and never ran.
    assert "one model call refused, with BudgetExceeded" in done.stdout
    assert "demo-deploy-old" in done.stdout.split("releases.unsafe", 1)[1]  # the gate's report
    assert "Skipping completed step: create_plan" in done.stdout
    assert "EVENT_TYPE_STEP_ATTEMPT_FAILED: step analyze, attempt 1" in done.stdout
    assert "analyze attempt 1: RESET" in done.stdout
