"""gRPC spans for servers and channels (the official instrumentation), only when tracing is on.

Client interceptors put the caller's trace context in the request metadata; server
interceptors continue it, so a call across services is one trace. Health checks are left
out: probes would bury the traces that matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import (
    aio_client_interceptors,
    aio_server_interceptor,
    client_interceptor,
    filters,
)

from perdure.telemetry.setup import tracing_enabled

_NOT_HEALTH = filters.negate(filters.health_check())


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
