"""Tracers that start no span where none would be recorded.

Without the SDK's tracer provider, a span is the API's non-recording copy of its parent's
context: starting one only makes that context current for a while. Where it is the context
current already, starting none changes nothing and costs nothing, and the hot path starts
spans for every journal call and step attempt (on a busy worker with tracing off, a tenth of
its time went to them).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

from perdure.telemetry.setup import tracing_enabled


class _CurrentSpan(AbstractContextManager[Span]):
    """Stands for a span not started: the current span, unchanged."""

    def __enter__(self) -> Span:
        return trace.get_current_span()

    def __exit__(self, *exc_info: object) -> None:
        return None


_UNCHANGED = _CurrentSpan()


class Tracer:
    """trace.get_tracer(name)'s spans, but none started where it would change nothing."""

    def __init__(self, name: str) -> None:
        self._tracer = trace.get_tracer(name)

    def start_as_current_span(
        self, name: str, context: Context | None = None, **kwargs: Any
    ) -> AbstractContextManager[Span]:
        """As opentelemetry's: a span current for the block, or the current span as it is when
        this process records no spans and the span would carry the current context."""
        if _changes_nothing(context):
            return _UNCHANGED
        return self._tracer.start_as_current_span(name, context, **kwargs)

    def start_span(self, name: str, context: Context | None = None, **kwargs: Any) -> Span:
        """As opentelemetry's (a span the caller ends)."""
        return self._tracer.start_span(name, context, **kwargs)


def _changes_nothing(context: Context | None) -> bool:
    """Whether a span started now under `context` would be a non-recording copy of the span
    context current already: no span is recorded here, and the parent is the current one (no
    context given) or neither the given parent nor the current span is a real one."""
    if tracing_enabled():
        return False
    if context is None:
        return True
    return not (_has_span(context) or _has_span(None))


def _has_span(context: Context | None) -> bool:
    return trace.get_current_span(context).get_span_context().is_valid
