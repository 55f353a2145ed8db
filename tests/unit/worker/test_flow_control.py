"""Flow control in the Python SDK (worker-protocol.md §27): a remote call's keys and estimate
go in its ScheduleStep, checked before anything is journaled; a step task's TaskDone carries
what its handler reported, nothing when it reported nothing, zero when nothing ran; a task
that came with budget_exceeded records a final BudgetExceeded failure without running, which
the workflow gets as BudgetExceededError."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import (
    BudgetExceededError,
    RetryPolicy,
    StepFailedError,
    Usage,
    Worker,
    current_step,
    remote_step,
)
from perdure.worker._context import Suspended
from perdure.worker._session import JournalCallError
from tests.unit.worker.fake_journal import FakeJournal, make_context
from tests.unit.worker.test_remote_calls import outcome, scheduled
from tests.unit.worker.test_worker_stream import FakeCall, NoLeases

ESTIMATE = Usage(units=2000, cost_micros=30_000)


async def test_a_call_sends_its_keys_and_estimate_in_schedule_step() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    with pytest.raises(Suspended):
        await ctx.call("chat", {"q": 1}, keys=["provider:openai", "model:gpt"], estimate=ESTIMATE)

    [request] = journal.recorded
    assert isinstance(request, jpb.ScheduleStepRequest)
    assert request.flow == fpb.StepFlow(
        keys=["provider:openai", "model:gpt"], estimate=fpb.Usage(units=2000, cost_micros=30_000)
    )


async def test_gather_sends_each_calls_own_flow_and_a_plain_call_none() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    with pytest.raises(Suspended):
        await ctx.gather(
            ctx.call("chat", 1, keys=["provider:openai"]),
            ctx.call("chat", 2, estimate=Usage(units=2**63 - 1)),
            ctx.call("chat", 3),
        )

    first, second, third = journal.recorded
    assert list(first.flow.keys) == ["provider:openai"] and not first.flow.HasField("estimate")
    assert list(second.flow.keys) == [] and second.flow.estimate.units == 2**63 - 1
    assert not third.HasField("flow")


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"keys": [f"k{n}" for n in range(9)]}, ValueError, "at most 8 keys"),
        ({"keys": [""]}, ValueError, "must not be empty"),
        ({"keys": ["x" * 201]}, ValueError, "at most 200 printable"),
        ({"keys": ["tab\there"]}, ValueError, "printable"),
        ({"keys": ["a", "a"]}, ValueError, "must not repeat"),
        ({"keys": "provider:openai"}, TypeError, "list of str"),
        ({"keys": [1]}, TypeError, "must be a str"),
        ({"estimate": {"units": 1}}, TypeError, "must be a Usage"),
    ],
)
async def test_bad_flow_settings_raise_at_the_call_before_anything_is_journaled(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])
    with pytest.raises(error, match=words):
        ctx.call("chat", 1, **options)
    assert journal.recorded == []


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"units": -1}, ValueError, r"units must be >= 0 and < 2\*\*63"),
        ({"cost_micros": 2**63}, ValueError, r"cost_micros must be >= 0 and < 2\*\*63"),
        ({"units": 1.5}, TypeError, "units must be an int"),
        ({"cost_micros": True}, TypeError, "cost_micros must be an int"),
    ],
)
def test_a_usage_holds_whole_numbers_of_int64(
    fields: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        Usage(**fields)


async def test_a_budget_exceeded_failure_raises_budget_exceeded_error_on_replay() -> None:
    failed = outcome(2, "chat", failure="over")
    failed.failure.CopyFrom(wf.Failure(type="BudgetExceeded", message="run budget: 5 over"))
    ctx = make_context(FakeJournal(), [scheduled(1, 0, "chat"), failed])

    with pytest.raises(BudgetExceededError) as raised:
        await ctx.call("chat", 1, estimate=ESTIMATE)

    assert isinstance(raised.value, StepFailedError)
    assert (raised.value.error_type, raised.value.message) == (
        "BudgetExceeded",
        "run budget: 5 over",
    )


async def test_other_failures_stay_plain_step_failures() -> None:
    ctx = make_context(FakeJournal(), [scheduled(1, 0, "chat"), outcome(2, "chat", failure="no")])
    with pytest.raises(StepFailedError) as raised:
        await ctx.call("chat", 1)
    assert type(raised.value) is StepFailedError


# -- step tasks --------------------------------------------------------------------------------

ran: list[str] = []


@remote_step
async def chat(prompt: Any) -> str:
    ran.append("chat")
    current_step().report_usage(units=10, cost_micros=7)
    current_step().report_usage(units=1200, cost_micros=2**62)  # the last report counts
    return "hi"


@remote_step
def quiet(prompt: Any) -> str:  # a sync body, which reports nothing
    ran.append("quiet")
    return "ok"


@remote_step
def threaded(prompt: Any) -> str:  # a sync body reports from its own thread
    current_step().report_usage(units=3)
    return "ok"


class StepSession:
    """The journal of one step task: LoadStep answers `loaded` (or raises `refusal`), every
    record is kept and answered empty."""

    def __init__(self, loaded: jpb.LoadStepResponse, refusal: str = "") -> None:
        self.loaded = loaded
        self.refusal = refusal
        self.records: list[jpb.RecordStepRequest] = []

    async def call(self, request: Any, timeout: float) -> Any:  # noqa: ASYNC109 - as the real one
        if isinstance(request, jpb.LoadStepRequest):
            if self.refusal:
                raise JournalCallError(grpc.StatusCode.FAILED_PRECONDITION, "closed", self.refusal)
            return self.loaded
        if isinstance(request, jpb.RecordStepRequest):
            self.records.append(request)
            return jpb.RecordStepResponse(event_id=9)
        return type(request).DESCRIPTOR.name  # not expected: fails the task loudly


def _loaded(step_type: str, attempt_lost: bool = False) -> jpb.LoadStepResponse:
    loaded = jpb.LoadStepResponse(
        step_type=step_type, attempt=1, attempt_lost=attempt_lost, workflow_type="agent"
    )
    loaded.retry.CopyFrom(RetryPolicy(maximum_attempts=1).to_message())
    loaded.input.encoding = "json/plain"
    loaded.input.data = b'"hello"'
    return loaded


async def _task_done(
    session: StepSession, task: tpb.Task, steps: list[Any] | None = None
) -> tpb.TaskDone:
    """Run the step task on a worker serving `steps` (the ones above); the TaskDone it sends."""
    call = FakeCall()
    call.flowing.set()
    worker = Worker(steps=steps or [chat, quiet, threaded])
    worker._call = call  # type: ignore[assignment]
    worker._keeper = NoLeases()  # type: ignore[assignment]
    await worker._run_one(task, session)  # type: ignore[arg-type]
    [written] = call.written
    return written.task_done


def _task(**fields: Any) -> tpb.Task:
    return tpb.Task(workflow_id="wf-1", step_id="chat", step_type="chat", fence=4, **fields)


async def test_task_done_carries_the_handlers_last_report() -> None:
    ran.clear()
    session = StepSession(_loaded("chat"))
    done = await _task_done(session, _task())
    assert ran == ["chat"] and session.records[0].output.data == b'"hi"'
    assert done.usage == fpb.Usage(units=1200, cost_micros=2**62)
    assert done.lease == tpb.LeaseRef(workflow_id="wf-1", step_id="chat", fence=4)


async def test_task_done_leaves_usage_unset_when_the_handler_reported_nothing() -> None:
    ran.clear()
    done = await _task_done(StepSession(_loaded("quiet")), _task())
    assert ran == ["quiet"] and not done.HasField("usage")


async def test_a_sync_handler_reports_from_its_thread() -> None:
    done = await _task_done(StepSession(_loaded("threaded")), _task())
    assert done.usage == fpb.Usage(units=3)


@pytest.mark.parametrize("refusal", ["STEP_CLOSED", "WORKFLOW_CLOSED", "STALE_FENCE"])
async def test_task_done_carries_zero_usage_when_the_load_runs_nothing(refusal: str) -> None:
    ran.clear()
    session = StepSession(_loaded("chat"), refusal)
    done = await _task_done(session, _task())
    assert ran == [] and session.records == []
    assert done.HasField("usage") and done.usage == fpb.Usage()


@pytest.mark.parametrize("attempt_lost", [False, True])
async def test_a_task_over_budget_records_a_final_budget_exceeded_failure_without_running(
    attempt_lost: bool,
) -> None:
    ran.clear()
    session = StepSession(_loaded("chat", attempt_lost))
    done = await _task_done(session, _task(budget_exceeded="run budget: 2000 units over by 500"))

    assert ran == []
    [record] = session.records
    assert record.step_task and record.attempt == 1 and not record.HasField("retry_delay")
    assert record.failure == wf.Failure(
        type="BudgetExceeded", message="run budget: 2000 units over by 500"
    )
    assert done.HasField("usage") and done.usage == fpb.Usage()


async def test_a_workflow_task_done_carries_no_usage() -> None:
    worker = Worker(steps=[chat])
    worker._keeper = NoLeases()  # type: ignore[assignment]
    call = FakeCall()
    call.flowing.set()
    worker._call = call  # type: ignore[assignment]
    await worker._task_done(tpb.TaskDone(lease=tpb.LeaseRef(workflow_id="wf-1", fence=1)))
    assert not call.written[0].task_done.HasField("usage")


def test_report_usage_outside_a_running_attempt_raises() -> None:
    with pytest.raises(RuntimeError, match="only available inside a running step"):
        current_step().report_usage(units=1)


async def test_a_local_steps_report_is_checked_and_ignored() -> None:
    journal = FakeJournal()
    ctx = make_context(journal, [])

    def body() -> int:
        current_step().report_usage(units=5)
        return 1

    def bad() -> int:
        current_step().report_usage(units=-5)
        return 1

    assert await ctx.step("body", body) == 1
    with pytest.raises(StepFailedError, match="ValueError"):
        await ctx.step("bad", bad, retry=RetryPolicy(maximum_attempts=1))
