"""The test OTLP receiver, fed by the real SDK exporters over gRPC and HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from tests.fixtures.otlp import OtlpReceiver

RESOURCE = Resource.create({"service.name": "probe", "service.instance.id": "probe-1"})


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


def exporter_for(protocol: str, receiver: OtlpReceiver) -> SpanExporter:
    if protocol == "grpc":
        return GrpcSpanExporter(endpoint=receiver.grpc_endpoint, insecure=True)
    compression = Compression.Gzip if protocol == "http-gzip" else Compression.NoCompression
    return HttpSpanExporter(endpoint=receiver.http_endpoint + "/v1/traces", compression=compression)


@pytest.mark.parametrize("protocol", ["grpc", "http", "http-gzip"])
def test_spans_arrive_flattened(receiver: OtlpReceiver, protocol: str) -> None:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter_for(protocol, receiver)))
    tracer = provider.get_tracer("probe-tests")
    with tracer.start_as_current_span("linked") as linked:
        linked_context = linked.get_span_context()
    with (
        tracer.start_as_current_span("parent", kind=SpanKind.SERVER),
        tracer.start_as_current_span(
            "child",
            kind=SpanKind.CLIENT,
            links=[Link(linked_context)],
            attributes={"perdure.step": "analyze", "attempt": 2, "tags": ["a", "b"]},
            record_exception=False,
            set_status_on_exception=False,
        ) as child,
    ):
        child.record_exception(ValueError("boom"))
        child.set_status(Status(StatusCode.ERROR, "step failed"))
    provider.shutdown()

    spans = receiver.wait_for_spans(lambda s: len(s) == 3, timeout=3, what="three spans")
    assert {s.protocol for s in spans} == {protocol.removesuffix("-gzip")}
    [parent] = receiver.spans(service="probe", name="parent")
    [child_span] = receiver.spans(name="child")
    [linked_span] = receiver.spans(name="linked")
    assert parent.parent_span_id == ""
    assert parent.kind == 2
    assert parent.resource["service.instance.id"] == "probe-1"
    assert (child_span.trace_id, child_span.parent_span_id) == (parent.trace_id, parent.span_id)
    assert child_span.kind == 3
    assert child_span.attributes == {"perdure.step": "analyze", "attempt": 2, "tags": ["a", "b"]}
    assert child_span.links == [(linked_span.trace_id, linked_span.span_id)]
    assert (child_span.status_code, child_span.status_message) == (2, "step failed")
    [(event_name, event_attributes)] = child_span.events
    assert event_name == "exception"
    assert event_attributes["exception.type"] == "ValueError"
    assert event_attributes["exception.message"] == "boom"
    assert child_span.start_ns <= child_span.end_ns


def test_wait_for_spans_times_out_with_what_it_got(receiver: OtlpReceiver) -> None:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter_for("grpc", receiver)))
    provider.get_tracer("probe-tests").start_span("lonely").end()
    provider.shutdown()

    with pytest.raises(AssertionError, match=r"waiting for a second span; received: probe: lonely"):
        receiver.wait_for_spans(lambda s: len(s) > 1, timeout=0.3, what="a second span")


def test_metrics_latest_values(receiver: OtlpReceiver) -> None:
    exporter = OTLPMetricExporter(endpoint=receiver.grpc_endpoint, insecure=True)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=100)
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter = provider.get_meter("probe-tests")
    counter = meter.create_counter("perdure.steps", unit="{step}")
    histogram = meter.create_histogram("perdure.step.duration", unit="s")
    counter.add(2, {"step.status": "ok"})
    counter.add(3, {"step.status": "ok"})
    counter.add(1, {"step.status": "failed"})
    histogram.record(0.5)
    histogram.record(1.5)
    provider.force_flush()

    value = receiver.wait_for_metric(
        "perdure.steps", lambda v: v == 6, timeout=3, what="six steps", service="probe"
    )
    assert value == 6.0
    assert receiver.latest("perdure.steps", where={"step.status": "ok"}) == 5.0
    assert receiver.latest("perdure.steps", "probe", where={"step.status": "failed"}) == 1.0
    assert receiver.latest("perdure.steps", "other") == 0.0
    assert receiver.latest("perdure.step.duration") == 2.0
    assert receiver.latest_count("perdure.step.duration") == 2
    [point, *_] = receiver.metric_points("perdure.step.duration", service="probe")
    assert (point.kind, point.unit, point.protocol) == ("histogram", "s", "grpc")
    provider.shutdown()


def test_http_answers_404_elsewhere(receiver: OtlpReceiver) -> None:
    request = urllib.request.Request(receiver.http_endpoint + "/v1/other", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=2)
    assert error.value.code == 404
