"""Tracers that start no span where none would be recorded: the same context current either
way, and every span recorded where tracing is on."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from perdure.telemetry import spans
from perdure.telemetry.setup import tracing_enabled
from perdure.telemetry.spans import Tracer

PARENT = SpanContext(
    trace_id=0x0AF7651916CD43DD8448EB211C80319C,
    span_id=0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
)


def parent_context() -> Context:
    return trace.set_span_in_context(NonRecordingSpan(PARENT))


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """What a tracer whose spans this process records exports (an SDK provider of its own,
    not the global one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    yield exporter
    provider.shutdown()


def test_with_tracing_off_no_span_is_started_and_the_current_span_stays() -> None:
    assert not tracing_enabled()
    with trace.use_span(NonRecordingSpan(PARENT)):
        current = trace.get_current_span()
        with Tracer("t").start_as_current_span("call") as span:
            assert span is current
            assert trace.get_current_span() is current


def test_with_tracing_off_a_given_parent_still_becomes_current() -> None:
    # A worker that traces nothing carries the workflow's context on to the services.
    with Tracer("t").start_as_current_span("task", parent_context()) as span:
        assert span.get_span_context() == PARENT
        assert trace.get_current_span().get_span_context() == PARENT
    assert not trace.get_current_span().get_span_context().is_valid


def test_with_tracing_off_an_empty_parent_under_a_real_span_is_still_a_root() -> None:
    with trace.use_span(NonRecordingSpan(PARENT)):
        with Tracer("t").start_as_current_span("call", Context()):
            assert not trace.get_current_span().get_span_context().is_valid
        assert trace.get_current_span().get_span_context() == PARENT


def test_with_tracing_on_every_span_is_recorded(
    exported: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spans, "tracing_enabled", lambda: True)
    tracer = Tracer("t")
    with (
        tracer.start_as_current_span("root"),
        tracer.start_as_current_span("child", parent_context()) as child,
    ):
        assert child.is_recording()
    names = {span.name: span for span in exported.get_finished_spans()}
    assert set(names) == {"root", "child"}
    child_parent = names["child"].parent
    assert child_parent is not None and child_parent.span_id == PARENT.span_id


def test_tracing_is_on_once_an_sdk_provider_is_set_globally_or_named_in_the_environment() -> None:
    # The global provider is set once per process: each case runs in a process of its own.
    check = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from perdure.telemetry.setup import tracing_enabled\n"
        "before = tracing_enabled()\n"
        "import sys\n"
        "if sys.argv[1] == 'set': trace.set_tracer_provider(TracerProvider())\n"
        "print(before, tracing_enabled())\n"
    )
    named = {**os.environ, "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    runs = {
        "set": ("set", os.environ),
        "named": ("-", named),
        "neither": ("-", os.environ),
    }
    answers = {
        case: subprocess.run(
            [sys.executable, "-c", check, argument],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for case, (argument, env) in runs.items()
    }
    assert answers == {
        "set": ["False", "True"],
        "named": ["True", "True"],
        "neither": ["False", "False"],
    }
