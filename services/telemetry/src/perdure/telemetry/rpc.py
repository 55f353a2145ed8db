"""gRPC spans for servers and channels (the official instrumentation), only when tracing is on.

Client interceptors put the caller's trace context in the request metadata; server
interceptors continue it, so a call across services is one trace. Health checks are left
out: probes would bury the traces that matter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.grpc import (
    aio_client_interceptors,
    aio_server_interceptor,
    client_interceptor,
    filters,
)
from opentelemetry.trace import Span, SpanKind

from perdure.telemetry.setup import tracing_enabled

_NOT_HEALTH = filters.negate(filters.health_check())
_tracer = trace.get_tracer("perdure.rpc")


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for a grpc.aio server (none when tracing is off)."""
    return [aio_server_interceptor(filter_=_NOT_HEALTH)] if tracing_enabled() else []


def aio_channel(address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """An insecure grpc.aio channel whose calls carry the trace context."""
    interceptors = aio_client_interceptors(filter_=_NOT_HEALTH) if tracing_enabled() else None
    return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)


def sync_channel(address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """An insecure blocking channel whose calls carry the trace context."""
    channel = grpc.insecure_channel(address, options=options)
    if not tracing_enabled():
        return channel
    return grpc.intercept_channel(channel, client_interceptor(filter_=_NOT_HEALTH))


@contextmanager
def multiplexed_call_span(
    service: str, method: str, kind: SpanKind, parent: Context | None = None
) -> Iterator[Span]:
    """The span a unary call of `service`/`method` gets from the interceptors, for the same
    call sent as a message on a stream: one name in traces, whichever way it travelled."""
    attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
    with _tracer.start_as_current_span(
        f"/{service}/{method}", parent, kind=kind, attributes=attributes
    ) as span:
        yield span
