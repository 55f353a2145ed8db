"""Tracer and meter providers configured by the standard OTEL_* environment variables.

OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER: a comma-separated list of `otlp`, `console`,
`none`. Unset means `otlp` when an OTLP endpoint is configured and `none` otherwise: with
nothing configured no provider is installed, so spans and instruments are the API's no-ops
and no exporter thread runs. OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL picks `grpc`
(default) or `http/protobuf`; endpoints, headers, sampling (OTEL_TRACES_SAMPLER), batching
(OTEL_BSP_*) and the export interval (OTEL_METRIC_EXPORT_INTERVAL) are read by the SDK.

The OpenTelemetry SDK and exporters are an extra (`perdure-telemetry[sdk]`; the services have
it, a worker gets it with `perdure[otel]`): this module imports them only to export. Without
them a process asking for exporters stops, saying what to install; one asking for nothing runs
on the API's no-ops.
"""

from __future__ import annotations

import functools
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from perdure.telemetry.buckets import DURATION_BUCKETS as DURATION_BUCKETS  # imported from here too
from perdure.telemetry.logs import configure_logging

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

_ENDPOINT_VARIABLES = {
    "traces": ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    "metrics": ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
}


def _exporter_names(signal: str) -> list[str]:
    """The exporters asked for one signal ("traces" or "metrics")."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    configured = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER")
    if configured is None:
        configured = "otlp" if any(os.environ.get(v) for v in _ENDPOINT_VARIABLES[signal]) else ""
    names = [name.strip().lower() for name in configured.split(",") if name.strip()]
    for name in names:
        if name not in ("otlp", "console", "none"):
            raise SystemExit(
                f"OTEL_{signal.upper()}_EXPORTER: unknown exporter {name!r} "
                "(choose otlp, console or none)"
            )
    return [name for name in names if name != "none"]


def _otlp_protocol(signal: str) -> str:
    protocol = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    ).strip()
    if protocol not in ("grpc", "http/protobuf"):
        raise SystemExit(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported "
            "(choose grpc or http/protobuf)"
        )
    return protocol


def _span_exporter(name: str) -> SpanExporter:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if name == "console":
        return ConsoleSpanExporter(out=sys.stdout)  # stdout now, not at import
    if _otlp_protocol("traces") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter()


def _metric_exporter(name: str) -> MetricExporter:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    if name == "console":
        return ConsoleMetricExporter(out=sys.stdout)
    if _otlp_protocol("metrics") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter()


def service_resource(service: str) -> Resource:
    """The process's resource: `service` as service.name unless OTEL_SERVICE_NAME or
    OTEL_RESOURCE_ATTRIBUTES say otherwise, the version, a fresh instance id."""
    from opentelemetry.sdk.resources import (
        SERVICE_INSTANCE_ID,
        SERVICE_NAME,
        SERVICE_VERSION,
        OTELResourceDetector,
        Resource,
    )

    defaults = Resource(
        {
            SERVICE_NAME: service,
            SERVICE_VERSION: version("perdure-telemetry"),
            SERVICE_INSTANCE_ID: uuid.uuid4().hex,
        }
    )
    return Resource.create(dict(defaults.merge(OTELResourceDetector().detect()).attributes))


def tracing_enabled() -> bool:
    """Whether spans are recorded in this process (an SDK tracer provider is installed)."""
    provider_class = _sdk_tracer_provider()
    return provider_class is not None and isinstance(_global_tracer_provider(), provider_class)


_UNREADABLE = object()


def _global_tracer_provider() -> object:
    """What `trace.get_tracer_provider()` returns, read without its lookup of
    OTEL_PYTHON_TRACER_PROVIDER in the environment at every call while no provider is set:
    asked on every span of the hot path, that lookup took a tenth of a busy worker's time."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNREADABLE)
    if provider is _UNREADABLE or (provider is None and _provider_named_in_environment()):
        return trace.get_tracer_provider()
    return provider


@functools.cache
def _provider_named_in_environment() -> bool:
    """Whether the environment names a tracer provider for the API to load (read once)."""
    return "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


@functools.cache
def _sdk_tracer_provider() -> type[TracerProvider] | None:
    """The SDK's TracerProvider class, looked up once (asked on every span of the hot path)."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:  # without the SDK, every tracer is the API's no-op
        return None
    return TracerProvider


@dataclass
class Telemetry:
    """The providers this process installed (None: that signal is off)."""

    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporters."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                provider.shutdown()


def build_telemetry(service: str) -> Telemetry:
    """The providers the environment asks for (none when it asks for nothing), not installed."""
    span_exporters = _exporter_names("traces")
    metric_exporters = _exporter_names("metrics")
    if not span_exporters and not metric_exporters:
        return Telemetry(None, None)
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise SystemExit(
            "OTEL_* variables ask for telemetry to be exported, but the OpenTelemetry SDK is not "
            "installed: install perdure[otel] (a worker) or perdure-telemetry[sdk]"
        ) from None
    resource = service_resource(service)
    tracer_provider = meter_provider = None
    if span_exporters:
        tracer_provider = TracerProvider(resource=resource)
        for name in span_exporters:
            tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(name)))
    if metric_exporters:
        readers = [PeriodicExportingMetricReader(_metric_exporter(n)) for n in metric_exporters]
        meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return Telemetry(tracer_provider, meter_provider)


def setup_telemetry(service: str) -> Telemetry:
    """Build the providers and make them this process's global ones."""
    telemetry = build_telemetry(service)
    if telemetry.tracer_provider is not None:
        trace.set_tracer_provider(telemetry.tracer_provider)
    if telemetry.meter_provider is not None:
        metrics.set_meter_provider(telemetry.meter_provider)
    return telemetry


@contextmanager
def telemetry_for(service: str, *, on_enabled: Callable[[], None] | None = None) -> Iterator[None]:
    """Logs, traces and metrics of one process for its lifetime, flushed when it ends.
    `on_enabled` runs when tracing is on (to instrument libraries the service uses)."""
    configure_logging(service)
    telemetry = setup_telemetry(service)
    if on_enabled is not None and telemetry.tracer_provider is not None:
        on_enabled()
    try:
        yield
    finally:
        telemetry.shutdown()
