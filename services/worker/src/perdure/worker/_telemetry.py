"""The worker's spans and instruments (no-ops unless telemetry is exported)."""

from __future__ import annotations

from datetime import datetime

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from perdure.telemetry.setup import DURATION_BUCKETS

tracer = trace.get_tracer("perdure.worker")
_meter = metrics.get_meter("perdure.worker")

_STEP_ATTEMPTS = _meter.create_counter(
    "perdure.step.attempts",
    unit="{attempt}",
    description="Step attempts run, by workflow type, step name and outcome "
    "(completed, retrying, failed).",
)
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
