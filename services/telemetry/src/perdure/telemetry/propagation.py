"""A workflow's trace context as a W3C carrier ({"traceparent": …, "tracestate": …}).

It is stored with the workflow and travels in task messages, so every later span of the
workflow, on any process, can join its trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.context import Context

Carrier = dict[str, str]


def current_carrier() -> Carrier:
    """The active span's context (empty when no span is recording)."""
    carrier: Carrier = {}
    propagate.inject(carrier)
    return carrier


def context_from(carrier: Mapping[str, str]) -> Context:
    """A context whose parent is the carrier's span (the root context when empty)."""
    if not carrier:  # what extracting from it gives, without the propagators' work
        return Context()
    return propagate.extract(dict(carrier))


def _span_context(carrier: Mapping[str, str]) -> trace.SpanContext:
    return trace.get_current_span(context_from(carrier)).get_span_context()


def trace_id_of(carrier: Mapping[str, str]) -> str:
    """The trace id (32 hex digits) a carrier names, or ""."""
    span_context = _span_context(carrier)
    return trace.format_trace_id(span_context.trace_id) if span_context.is_valid else ""


def links_to(*carriers: Mapping[str, str]) -> list[trace.Link]:
    """Links to the spans the carriers name, skipping empty ones."""
    contexts = [_span_context(carrier) for carrier in carriers]
    return [trace.Link(context) for context in contexts if context.is_valid]


@contextmanager
def untraced() -> Iterator[None]:
    """No library spans (database, gRPC) inside: for polling loops, whose spans would bury the
    traces that matter. Perdure's own spans still record."""
    try:  # the instrumentation comes with the SDK (perdure-telemetry[sdk])
        from opentelemetry.instrumentation.utils import suppress_instrumentation
    except ImportError:  # no instrumentation installed: no library spans to suppress
        yield
        return
    with suppress_instrumentation():
        yield
