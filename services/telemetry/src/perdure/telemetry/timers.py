"""How late timed wake-ups fire: one instrument and one span, whichever process fires them (the
scheduler, granting a due task; a worker, at the end of a timer it was granted ahead of time)."""

from __future__ import annotations

from datetime import datetime

from opentelemetry.context import Context
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.util.types import AttributeValue

from perdure.telemetry.buckets import DURATION_BUCKETS
from perdure.telemetry.spans import Tracer


def timer_lateness(meter: Meter) -> Histogram:
    """The `perdure.timer.lateness` histogram of a process."""
    return meter.create_histogram(
        "perdure.timer.lateness",
        unit="s",
        description="How late timed wake-ups (timer, signal timeout, retry) fire, by kind.",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )


def record_fire(
    tracer: Tracer,
    lateness: Histogram,
    kind: str,
    due: datetime,
    late_by: float,
    attributes: dict[str, AttributeValue],
    parent: Context | None = None,
) -> None:
    """Measure a wake-up `late_by` seconds after its due time, and give it a span from the due
    time to now: the span's length is how late it fired."""
    lateness.record(late_by, {"perdure.wait.kind": kind})
    fired = {**attributes, "perdure.wait.kind": kind}
    fired["perdure.timer.lateness_ms"] = round(late_by * 1000, 3)
    due_ns = int(due.timestamp() * 1e9)
    tracer.start_span("perdure.timer.fire", parent, attributes=fired, start_time=due_ns).end()
