"""Execute one attempt of a remote step under its step task's lease."""

from __future__ import annotations

import logging

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._attempt import Attempt, Heartbeats, StepContext, run_attempt
from perdure.worker._errors import BUDGET_EXCEEDED
from perdure.worker._journal import JournalClient
from perdure.worker._payload import from_payload
from perdure.worker._registry import StepFunction
from perdure.worker._retry import RetryPolicy
from perdure.worker._session import JournalSession
from perdure.worker._usage import UsageReport

log = logging.getLogger("perdure.worker")


async def run_step_task(
    task: tpb.Task,
    session: JournalSession,
    steps: dict[str, StepFunction],
    usage: UsageReport | None = None,
) -> None:
    """Load the step (fencing out earlier holders of its task), run the attempt due, and
    journal its outcome; a failed attempt with retries left is made due again by history.
    `usage` takes what the handler reports (zero if it never starts; the report is journaled
    with the outcome either way). A task that came with
    budget_exceeded runs nothing: its attempt is recorded as a final BudgetExceeded failure.
    Raises LeaseLostError if fenced out, or if the step or its workflow is closed already."""
    journal = JournalClient(session, task.workflow_id, task.fence)
    request = jpb.LoadStepRequest(
        workflow_id=task.workflow_id,
        step_id=task.step_id,
        fence=task.fence,
        lease_proof=task.lease_proof,
    )
    loaded: jpb.LoadStepResponse = await journal.call(request)
    if task.budget_exceeded:
        await _refuse_over_budget(task, loaded, journal)
        return
    fn = steps[loaded.step_type]  # the scheduler grants only the types this worker declared
    step = StepContext(
        workflow_id=task.workflow_id,
        step_id=task.step_id,
        idempotency_key=f"{task.workflow_id}:{task.step_id}",
        fence=task.fence,
        attempt=loaded.attempt,
        heartbeat_details=(
            from_payload(loaded.heartbeat_details) if loaded.HasField("heartbeat_details") else None
        ),
    )
    attempt = Attempt(
        step,
        loaded.step_type,
        fn,
        (from_payload(loaded.input),),
        {},
        RetryPolicy.from_message(loaded.retry),
        _seconds(loaded, "timeout"),
        loaded.workflow_type,
        heartbeat_timeout=_seconds(loaded, "heartbeat_timeout"),
        journal_start=False,  # the load started it
        usage=usage if usage is not None else UsageReport(),
    )
    record = jpb.RecordStepRequest(step_id=task.step_id, step_task=True)
    beats = Heartbeats(journal.record, True)
    attempted = await run_attempt(attempt, record, journal.record, beats, loaded.attempt_lost)
    outcome = (
        "completed" if attempted.error is None else "retrying" if attempted.retry_at else "failed"
    )
    log.info(
        "remote step %s of %s (attempt %d, fence %d): %s",
        task.step_id,
        task.workflow_id,
        loaded.attempt,
        task.fence,
        outcome,
    )


async def _refuse_over_budget(
    task: tpb.Task, loaded: jpb.LoadStepResponse, journal: JournalClient
) -> None:
    """Record the loaded attempt (lost or not: nothing runs either way) as the step's final
    failure, BudgetExceeded, with the scheduler's word on which budget and by how much."""
    record = jpb.RecordStepRequest(
        step_id=task.step_id,
        step_task=True,
        attempt=loaded.attempt,
        failure=wf.Failure(type=BUDGET_EXCEEDED, message=task.budget_exceeded),
    )
    record.start_time.GetCurrentTime()
    await journal.record(record)
    log.warning(
        "remote step %s of %s (attempt %d, fence %d) not run: %s",
        task.step_id,
        task.workflow_id,
        loaded.attempt,
        task.fence,
        task.budget_exceeded,
    )


def _seconds(loaded: jpb.LoadStepResponse, field: str) -> float | None:
    """A time limit of the loaded step, in seconds; None when unset."""
    if not loaded.HasField(field):
        return None
    limit: float = getattr(loaded, field).ToTimedelta().total_seconds()
    return limit
