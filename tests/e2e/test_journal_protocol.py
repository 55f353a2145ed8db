"""The journal half of the worker protocol, spoken directly, as a worker in another language
would: fences, idempotent writes, conflicts and closed runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._payload import from_payload, to_payload
from tests.fixtures.cluster import Cluster
from tests.fixtures.rpc import error_reason

QUEUE = "hand-driven"


@pytest.fixture
def journal(cluster: Cluster) -> Iterator[jgrpc.JournalServiceStub]:
    """A run on a queue whose only worker has left, and a raw journal stub to drive it."""
    cluster.start_worker("registrar", task_queue=QUEUE).kill()  # its types stay registered
    with cluster.client() as client:
        client.start_workflow(
            "five_steps", {"ledger": "unused"}, workflow_id="raw-1", task_queue=QUEUE
        )
    with grpc.insecure_channel(cluster.address("history")) as channel:
        yield jgrpc.JournalServiceStub(channel)


def reason_of(call: object, request: object) -> str:
    """Send a request that must fail with FAILED_PRECONDITION; return its reason."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30)  # type: ignore[operator]
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    return error_reason(caught.value)


def step(fence: int, step_id: str, position: int, text: str) -> jpb.RecordStepRequest:
    return jpb.RecordStepRequest(
        workflow_id="raw-1",
        fence=fence,
        step_id=step_id,
        step_name=step_id.split("#")[0],
        position=position,
        attempt=1,
        output=to_payload(text),
    )


def test_a_hand_driven_run_follows_the_journal_rules(
    journal: jgrpc.JournalServiceStub, cluster: Cluster
) -> None:
    asked = time.time()
    loaded = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=5))
    answered = time.time()
    assert loaded.workflow.status == wf.WORKFLOW_STATUS_RUNNING and loaded.workflow.fence == 5
    assert [e.event_type for e in loaded.events] == [wf.EVENT_TYPE_WORKFLOW_STARTED]
    # The clock to wait on is read after the events, so never before the load's now, and (one
    # machine, one clock) within the call.
    now, clock = loaded.now.ToNanoseconds() / 1e9, loaded.clock.ToNanoseconds() / 1e9
    assert loaded.HasField("clock") and asked <= now <= clock <= answered

    first = journal.RecordStep(step(5, "a", 0, "one"))
    again = journal.RecordStep(step(5, "a", 0, "one"))  # a retried call: same answer
    assert first.event_id == again.event_id == 2
    assert reason_of(journal.RecordStep, step(5, "a", 0, "other")) == "STEP_CONFLICT"
    assert reason_of(journal.RecordStep, step(5, "b", 0, "two")) == "STEP_CONFLICT"
    assert journal.RecordStep(step(5, "a#2", 1, "two")).event_id == 3

    # Only a load takes a lease up: a write under a fence never loaded is refused, and
    # raises nothing.
    assert reason_of(journal.RecordStep, step(9, "b", 2, "unloaded")) == "FENCE_NOT_LOADED"
    # A newer lease fences out the older one, in the same transaction as the write.
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=6))
    assert reason_of(journal.RecordStep, step(5, "c", 2, "late")) == "STALE_FENCE"
    assert (
        reason_of(journal.LoadJournal, jpb.LoadJournalRequest(workflow_id="raw-1", fence=5))
        == "STALE_FENCE"
    )

    finish = jpb.FinishWorkflowRequest(workflow_id="raw-1", fence=6, result=to_payload(42))
    assert journal.FinishWorkflow(finish).status == wf.WORKFLOW_STATUS_COMPLETED
    assert journal.FinishWorkflow(finish).status == wf.WORKFLOW_STATUS_COMPLETED  # retried
    assert reason_of(journal.RecordStep, step(6, "c", 2, "after")) == "WORKFLOW_CLOSED"
    failing = jpb.FinishWorkflowRequest(
        workflow_id="raw-1", fence=6, failure=wf.Failure(type="X", message="no")
    )
    assert reason_of(journal.FinishWorkflow, failing) == "WORKFLOW_CLOSED"

    # A closed run is not loaded again, not even under its last fence.
    load = jpb.LoadJournalRequest(workflow_id="raw-1", fence=7)
    assert reason_of(journal.LoadJournal, load) == "WORKFLOW_CLOSED"
    with cluster.client() as client:
        final = list(client.history("raw-1"))
        closed = client.describe("raw-1").workflow
    assert [(e.event_id, e.step_id, e.fence) for e in final] == [
        (1, "", 0),
        (2, "a", 5),
        (3, "a#2", 5),
        (4, "", 6),
    ]
    assert from_payload(closed.result) == 42 and closed.fence == 6


def test_a_finish_sent_again_with_another_outcome_is_refused(
    cluster: Cluster, journal: jgrpc.JournalServiceStub
) -> None:
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1))
    first = jpb.FinishWorkflowRequest(
        workflow_id="raw-1", fence=1, failure=wf.Failure(type="X", message="first")
    )
    assert journal.FinishWorkflow(first).status == wf.WORKFLOW_STATUS_FAILED
    assert journal.FinishWorkflow(first).status == wf.WORKFLOW_STATUS_FAILED  # identical: ok
    other = jpb.FinishWorkflowRequest()
    other.CopyFrom(first)
    other.failure.message = "second"  # same lease and status, another failure
    with pytest.raises(grpc.RpcError) as caught:
        journal.FinishWorkflow(other, timeout=30)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(caught.value) == "WORKFLOW_CLOSED"
    assert "another outcome" in (caught.value.details() or "")

    with cluster.client() as client:  # a closed run is read through the public API
        assert client.describe("raw-1").workflow.failure.message == "first"
        final = list(client.history("raw-1"))
    closing = [e for e in final if e.event_type == wf.EVENT_TYPE_WORKFLOW_FAILED]
    assert [e.failure.message for e in closing] == ["first"]


def test_a_failed_attempt_sent_again_is_journaled_once(
    journal: jgrpc.JournalServiceStub,
) -> None:
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1))
    failed = jpb.RecordStepRequest(
        workflow_id="raw-1",
        fence=1,
        step_id="flaky",
        step_name="flaky",
        position=0,
        attempt=1,
        failure=wf.Failure(type="IOError", message="try again"),
    )
    failed.retry_delay.FromSeconds(30)
    first = journal.RecordStep(failed)
    again = journal.RecordStep(failed)  # its answer was lost: sent again
    assert (again.event_id, again.retry_time) == (first.event_id, first.retry_time)
    other = jpb.RecordStepRequest()
    other.CopyFrom(failed)
    other.failure.message = "another failure"
    assert reason_of(journal.RecordStep, other) == "STEP_CONFLICT"
    other.attempt = 2  # the next attempt is a new event
    assert journal.RecordStep(other).event_id == first.event_id + 1
    events = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1)).events
    attempts = [e.attempt for e in events if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED]
    assert attempts == [1, 2]


def test_unknown_workflows_are_not_found(journal: jgrpc.JournalServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="nope", fence=1), timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "WORKFLOW_NOT_FOUND"


def test_a_session_answers_calls_by_id_with_the_unary_methods_answers(
    journal: jgrpc.JournalServiceStub,
) -> None:
    """Several calls on one Session stream: answered by id, errors as SessionError."""
    loaded = jpb.JournalCall(
        id=7, load_journal=jpb.LoadJournalRequest(workflow_id="raw-1", fence=3)
    )
    recorded = jpb.JournalCall(id=8, record_step=step(3, "a", 0, "one"))
    stale = jpb.JournalCall(id=9, record_step=step(2, "b", 1, "two"))
    empty = jpb.JournalCall(id=10)
    # The load must land first: the record and the stale write depend on its fence mark.
    [first] = next(journal.Session(iter([jpb.SessionRequest(calls=[loaded])]), timeout=30)).answers
    assert first.id == 7 and first.load_journal.workflow.fence == 3
    together = jpb.SessionRequest(calls=[recorded, stale, empty])
    answers = {
        answer.id: answer
        for message in journal.Session(iter([together]), timeout=30)
        for answer in message.answers
    }
    assert set(answers) == {8, 9, 10}
    assert answers[8].record_step.event_id == 2
    assert (answers[9].error.code, answers[9].error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION.value[0],
        "STALE_FENCE",
    )
    assert answers[10].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "needs one request" in answers[10].error.message
    # What the session wrote is what a unary load sees.
    reloaded = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=4))
    assert [e.step_id for e in reloaded.events if e.step_id] == ["a"]


def schedule(fence: int, step_id: str, position: int, **fields: object) -> jpb.ScheduleStepRequest:
    request = jpb.ScheduleStepRequest(
        workflow_id="raw-1",
        fence=fence,
        step_id=step_id,
        step_name=step_id.split("#")[0],
        position=position,
        task_queue="tools",
        input=to_payload("in"),
    )
    for name, value in fields.items():
        field = getattr(request, name)
        if isinstance(value, int):
            setattr(request, name, value)
        else:
            field.CopyFrom(value)
    return request


def attempt_of(fence: int, step_id: str, attempt: int, **outcome: Any) -> jpb.RecordStepRequest:
    return jpb.RecordStepRequest(
        workflow_id="raw-1",
        fence=fence,
        step_id=step_id,
        attempt=attempt,
        step_task=True,
        **outcome,
    )


def invalid(call: object, request: object) -> str:
    """Send a request that must fail with INVALID_ARGUMENT; return its message."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30)  # type: ignore[operator]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(caught.value.details())


def test_a_remote_step_has_a_fence_of_its_own(journal: jgrpc.JournalServiceStub) -> None:
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=3))
    first = journal.ScheduleStep(schedule(3, "charge", 0))
    assert journal.ScheduleStep(schedule(3, "charge", 0)).event_id == first.event_id  # resent
    other_input = schedule(3, "charge", 0, input=to_payload("other"))
    assert reason_of(journal.ScheduleStep, other_input) == "STEP_CONFLICT"

    # The step task's fences count apart from the workflow's (3): 1 is not stale for it. The
    # load starts attempt 1; the same load sent again starts nothing more.
    load = jpb.LoadStepRequest(workflow_id="raw-1", step_id="charge", fence=1)
    loaded = journal.LoadStep(load)
    assert (loaded.step_type, from_payload(loaded.input), loaded.attempt) == ("charge", "in", 1)
    assert loaded.retry.maximum_attempts == 5  # the default policy: the call set none
    assert not loaded.attempt_lost and not journal.LoadStep(load).attempt_lost
    failed = attempt_of(
        1, "charge", 1, failure=wf.Failure(type="E", message="once"), retry_delay=Duration()
    )
    assert journal.RecordStep(failed).event_id == journal.RecordStep(failed).event_id  # resent

    # A newer step task fences out the older one; the workflow's lease is untouched.
    retried = journal.LoadStep(jpb.LoadStepRequest(workflow_id="raw-1", step_id="charge", fence=2))
    assert retried.attempt == 2
    late = attempt_of(1, "charge", 2, output=to_payload("late"))
    assert reason_of(journal.RecordStep, late) == "STALE_FENCE"
    done = attempt_of(2, "charge", 2, output=to_payload("ok"))
    assert journal.RecordStep(done).event_id == journal.RecordStep(done).event_id  # resent
    different = attempt_of(2, "charge", 2, output=to_payload("other"))
    assert reason_of(journal.RecordStep, different) == "STEP_CONFLICT"
    closed = jpb.LoadStepRequest(workflow_id="raw-1", step_id="charge", fence=3)
    assert reason_of(journal.LoadStep, closed) == "STEP_CLOSED"
    assert journal.RecordStep(step(3, "after", 1, "x")).event_id > 0  # still the run's lease

    reloaded = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=4))
    kinds = [(e.event_type, e.step_id, e.fence) for e in reloaded.events if e.step_id]
    assert kinds == [
        (wf.EVENT_TYPE_STEP_SCHEDULED, "charge", 3),
        (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, "charge", 1),
        (wf.EVENT_TYPE_STEP_ATTEMPT_FAILED, "charge", 1),
        (wf.EVENT_TYPE_STEP_ATTEMPT_STARTED, "charge", 2),
        (wf.EVENT_TYPE_STEP_COMPLETED, "charge", 2),
        (wf.EVENT_TYPE_STEP_COMPLETED, "after", 3),
    ]


def test_an_attempt_started_and_never_recorded_is_reported_lost(
    journal: jgrpc.JournalServiceStub,
) -> None:
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1))
    journal.ScheduleStep(schedule(1, "ship", 0, heartbeat_timeout=Duration(seconds=2)))
    load = jpb.LoadStepRequest(workflow_id="raw-1", step_id="ship", fence=1)
    first = journal.LoadStep(load)  # started; its worker dies before recording
    assert (first.attempt, first.heartbeat_timeout.seconds) == (1, 2)
    load.fence = 2
    lost = journal.LoadStep(load)
    assert (lost.attempt, lost.attempt_lost) == (1, True)
    failed = attempt_of(
        2,
        "ship",
        1,
        failure=wf.Failure(type="WorkerLostError", message="lost"),
        retry_delay=Duration(),
    )
    journal.RecordStep(failed)
    load.fence = 3
    retried = journal.LoadStep(load)
    assert (retried.attempt, retried.attempt_lost) == (2, False)

    # A local step's start, recorded by the workflow's lease before its body runs.
    start = step(1, "pack", 1, "unused")
    start.ClearField("output")
    start.attempt_started = True
    journal.RecordStep(start)
    events = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1)).events
    started = [
        (e.step_id, e.attempt, e.position)
        for e in events
        if e.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_STARTED
    ]
    assert started == [("ship", 1, 0), ("ship", 2, 0), ("pack", 1, 0)]  # none positioned
    with_outcome = step(1, "pack", 1, "x")
    with_outcome.attempt_started = True
    assert "attempt_started goes without an outcome" in invalid(journal.RecordStep, with_outcome)
    start.attempt = 0
    assert "attempt must be 1 or more" in invalid(journal.RecordStep, start)
    by_step_task = attempt_of(3, "ship", 2)
    by_step_task.attempt_started = True
    assert "started by LoadStep" in invalid(journal.RecordStep, by_step_task)


def test_remote_step_calls_are_validated(journal: jgrpc.JournalServiceStub) -> None:
    journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw-1", fence=1))
    no_queue = schedule(1, "charge", 0)
    no_queue.task_queue = ""
    assert "task_queue" in invalid(journal.ScheduleStep, no_queue)
    slow_backoff = schedule(1, "charge", 0, retry=jpb.RetryPolicy(backoff_coefficient=0.5))
    assert "backoff_coefficient" in invalid(journal.ScheduleStep, slow_backoff)
    negative = schedule(1, "charge", 0, timeout=Duration(seconds=-1))
    assert "timeout" in invalid(journal.ScheduleStep, negative)
    silent = schedule(1, "charge", 0, heartbeat_timeout=Duration(seconds=0))
    assert "heartbeat_timeout must be positive" in invalid(journal.ScheduleStep, silent)
    load = jpb.LoadStepRequest(workflow_id="raw-1", step_id="", fence=1)
    assert "step_id" in invalid(journal.LoadStep, load)
    with pytest.raises(grpc.RpcError) as caught:
        journal.LoadStep(jpb.LoadStepRequest(workflow_id="raw-1", step_id="nope", fence=1))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_reason(caught.value) == "STEP_NOT_FOUND"
