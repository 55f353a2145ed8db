"""The worker's spans and instruments (no-ops unless telemetry is exported)."""

from __future__ import annotations

from datetime import datetime

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.telemetry.setup import DURATION_BUCKETS
from perdure.telemetry.spans import Tracer
from perdure.telemetry.timers import timer_lateness

tracer = Tracer("perdure.worker")
_meter = metrics.get_meter("perdure.worker")

_STEP_ATTEMPTS = _meter.create_counter(
    "perdure.step.attempts",
    unit="{attempt}",
    description="Step attempts run, by workflow type, step name and outcome "
    "(completed, retrying, failed).",
)
LEASES_SELF_FENCED = _meter.create_counter(
    "perdure.worker.leases.self_fenced",
    unit="{lease}",
    description="Leases whose work this worker stopped because it could not renew them before "
    "their deadline (the scheduler or the link to it was down), by task queue.",
)
CACHE_LOOKUPS = _meter.create_counter(
    "perdure.worker.cache.lookups",
    unit="{task}",
    description="Workflow tasks and the cache of suspended runs (sticky execution), by outcome: "
    "hit (resumed), stale (kept but replayed: another lease loaded the run), miss (replayed), "
    "evicted_count and evicted_bytes (a run dropped to stay within a bound).",
)
LOOP_BLOCKED = _meter.create_counter(
    "perdure.worker.loop.blocked",
    unit="{stall}",
    description="Times user code blocked the worker's event loop for longer than a second.",
)
# Timers this worker waited out (granted ahead of time) fire here, and are measured here.
TIMER_LATENESS = timer_lateness(_meter)
_STEP_DURATION = _meter.create_histogram(
    "perdure.step.duration",
    unit="s",
    description="How long one step attempt ran, by workflow type, step name and outcome.",
    explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
)


def step_attempt_ended(
    span: trace.Span,
    workflow_type: str,
    step_name: str,
    seconds: float,
    error: BaseException | None = None,
    retry_at: datetime | None = None,
) -> None:
    """Record how a step attempt ended on its span and in the metrics."""
    outcome = "completed" if error is None else "retrying" if retry_at else "failed"
    span.set_attribute("perdure.step.outcome", outcome)
    if error is not None:
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    if retry_at is not None:
        span.set_attribute("perdure.step.next_retry_time", retry_at.isoformat())
    attributes = {
        "perdure.workflow.type": workflow_type,
        "perdure.step.name": step_name,
        "perdure.step.outcome": outcome,
    }
    _STEP_ATTEMPTS.add(1, attributes)
    _STEP_DURATION.record(seconds, attributes)


def wait_attributes(wait: wf.Wait) -> dict[str, AttributeValue]:
    """What a wait is for, as span attributes."""
    attributes: dict[str, AttributeValue] = {
        "perdure.wait.kind": wf.WaitKind.Name(wait.kind).removeprefix("WAIT_KIND_").lower(),
        "perdure.wait.name": wait.name,
    }
    if wait.HasField("until"):
        attributes["perdure.wait.until"] = wait.until.ToJsonString()
    return attributes


def trace_ended_wait(loaded: jpb.LoadJournalResponse) -> None:
    """If this run ends a wait, a span of the whole wait: from the suspension to the load,
    both on the database clock (no process was running meanwhile)."""
    last = next((e for e in reversed(loaded.events) if e.fence > 0), None)  # the last run's
    if last is None or last.event_type != wf.EVENT_TYPE_WORKFLOW_SUSPENDED:
        return
    span = tracer.start_span(
        "perdure.wait",
        attributes=wait_attributes(last.wait),
        start_time=last.event_time.ToNanoseconds(),
    )
    span.end(end_time=loaded.now.ToNanoseconds())
