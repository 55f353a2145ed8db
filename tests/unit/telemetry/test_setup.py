"""Telemetry configured by the standard OTEL_* variables: off by default, at no cost."""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Iterator

import pytest

from perdure.telemetry.logs import _TraceFormatter
from perdure.telemetry.setup import Telemetry, build_telemetry
from tests.fixtures.otlp import OtlpReceiver

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def built() -> Iterator[list[Telemetry]]:
    """Telemetry the test builds, shut down afterwards."""
    made: list[Telemetry] = []
    yield made
    for telemetry in made:
        telemetry.shutdown()


def export_one_span(telemetry: Telemetry, name: str) -> None:
    assert telemetry.tracer_provider is not None
    with telemetry.tracer_provider.get_tracer("test").start_as_current_span(name):
        pass
    telemetry.tracer_provider.force_flush()


def test_nothing_configured_means_nothing_runs(caplog: pytest.LogCaptureFixture) -> None:
    threads_before = {thread.name for thread in threading.enumerate()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        telemetry = build_telemetry("perdure-test")

    assert telemetry == Telemetry(None, None)
    assert {thread.name for thread in threading.enumerate()} == threads_before
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_endpoint_alone_turns_otlp_on(
    monkeypatch: pytest.MonkeyPatch, otlp_receiver: OtlpReceiver, built: list[Telemetry]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.grpc_endpoint)
    telemetry = build_telemetry("perdure-test")
    built.append(telemetry)

    assert telemetry.meter_provider is not None
    export_one_span(telemetry, "over-grpc")

    span = otlp_receiver.wait_for_spans(bool, 10, "the span")[0]
    assert (span.name, span.protocol, span.service) == ("over-grpc", "grpc", "perdure-test")
    assert {"service.version", "service.instance.id"} <= set(span.resource)


def test_otlp_over_http_and_the_environment_names_the_service(
    monkeypatch: pytest.MonkeyPatch, otlp_receiver: OtlpReceiver, built: list[Telemetry]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.http_endpoint)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "history-eu-1")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    telemetry = build_telemetry("perdure-history")
    built.append(telemetry)

    assert telemetry.meter_provider is None
    export_one_span(telemetry, "over-http")

    span = otlp_receiver.wait_for_spans(bool, 10, "the span")[0]
    assert (span.protocol, span.service) == ("http", "history-eu-1")
    assert span.resource["deployment.environment"] == "staging"


def test_console_exporter_prints_spans(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], built: list[Telemetry]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    telemetry = build_telemetry("perdure-test")
    built.append(telemetry)

    export_one_span(telemetry, "printed")

    assert '"name": "printed"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_TRACES_EXPORTER", "jaeger", "unknown exporter 'jaeger'"),
        ("OTEL_METRICS_EXPORTER", "prometheus", "unknown exporter 'prometheus'"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "'http/json' is not supported"),
    ],
)
def test_a_bad_setting_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit, match=message):
        build_telemetry("perdure-test")


def test_the_sdk_can_be_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert build_telemetry("perdure-test") == Telemetry(None, None)


def log_line(formatter: logging.Formatter, message: str) -> str:
    record = logging.LogRecord("perdure.test", logging.INFO, __file__, 1, message, None, None)
    return formatter.format(record)


def test_log_lines_inside_a_span_carry_its_ids(
    monkeypatch: pytest.MonkeyPatch, built: list[Telemetry]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    telemetry = build_telemetry("perdure-test")
    built.append(telemetry)
    assert telemetry.tracer_provider is not None
    text, structured = _TraceFormatter("perdure-test", False), _TraceFormatter("perdure-test", True)

    outside = log_line(text, "before")
    with telemetry.tracer_provider.get_tracer("t").start_as_current_span("s") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        span_id = format(span.get_span_context().span_id, "016x")
        inside = log_line(text, "during")
        entry = json.loads(log_line(structured, "as json"))

    assert "trace_id" not in outside and "perdure-test perdure.test: before" in outside
    assert inside.endswith(f"during trace_id={trace_id} span_id={span_id}")
    assert entry["message"] == "as json" and entry["service"] == "perdure-test"
    assert (entry["trace_id"], entry["span_id"]) == (trace_id, span_id)


def test_sampling_follows_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch, built: list[Telemetry]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    telemetry = build_telemetry("perdure-test")
    built.append(telemetry)
    assert telemetry.tracer_provider is not None

    with telemetry.tracer_provider.get_tracer("t").start_as_current_span("dropped") as span:
        assert not span.is_recording()
