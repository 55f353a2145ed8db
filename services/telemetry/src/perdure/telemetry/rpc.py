"""gRPC spans for servers and channels (the official instrumentation), only when tracing is on.

Client interceptors put the caller's trace context in the request metadata; server
interceptors continue it, so a call across services is one trace. Health checks are left
out: probes would bury the traces that matter. The instrumentation comes with the SDK
(perdure-telemetry[sdk]) and is imported only when tracing is on: a worker without the SDK
builds its channels without it.

Channels are TLS when PERDURE_TLS_CA is set: they trust that CA, and present the certificate
in PERDURE_TLS_CERT/PERDURE_TLS_KEY when those are set (mutual TLS).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from perdure.telemetry.credentials import aio_bearer, aio_metadata, sync_bearer
from perdure.telemetry.setup import tracing_enabled
from perdure.telemetry.spans import Tracer

# A connection to every address a name resolves to (each replica behind a headless Service's
# DNS name, or an "ipv4:host:port,host:port" list), calls taking turns on those that are up.
# Servers close connections after a while (grpc.max_connection_age_ms), and the name is
# resolved again then, so replicas that start later get their share. An address that refused
# is tried again at least every second (the default backoff grows to two minutes): a replica
# that restarts is back in the rotation at once.
# The largest message any Perdure channel or server sends or takes, both ways: gRPC's default
# of 4 MiB received is less than one run's outputs can add up to (2 MiB payloads, many steps),
# and a limit that differs between the two ends of a channel fails calls only one end allows.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# One call or answer of a stream that carries several in a message (JournalService.Session)
# keeps this much less, for the message around it: larger, it fails alone.
MAX_ITEM_BYTES = MAX_MESSAGE_BYTES - 64 * 1024
MESSAGE_LIMITS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
_CHANNEL_DEFAULTS = [
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.max_reconnect_backoff_ms", 1000),
    *MESSAGE_LIMITS,
]
_tracer = Tracer("perdure.rpc")


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for a grpc.aio server (none when tracing is off)."""
    if not tracing_enabled():
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    # Calls a server does not trace: health checks, and lease renewals, a poll every few
    # seconds per worker whose spans would bury the traces that matter.
    untraced = filters.any_of(filters.health_check(), filters.method_name("RenewLeases"))
    return [aio_server_interceptor(filter_=filters.negate(untraced))]


def _client_interceptors(aio: bool) -> list[Any]:
    """The instrumentation's client interceptors, health checks left out (none when tracing
    is off)."""
    if not tracing_enabled():
        return []
    from opentelemetry.instrumentation.grpc import (
        aio_client_interceptors,
        client_interceptor,
        filters,
    )

    not_health = filters.negate(filters.health_check())
    if aio:
        return list(aio_client_interceptors(filter_=not_health))
    return [client_interceptor(filter_=not_health)]


class TLSConfigError(ValueError):
    """PERDURE_TLS_* names a file that cannot be read, or only half of a certificate."""


@dataclass(frozen=True)
class TLSFiles:
    """The PERDURE_TLS_* paths of this process (None where unset)."""

    ca: Path | None
    cert: Path | None
    key: Path | None

    @classmethod
    def from_env(cls) -> TLSFiles:
        """The paths as set, unchecked."""
        paths = [
            Path(value) if (value := os.environ.get(variable, "").strip()) else None
            for variable in ("PERDURE_TLS_CA", "PERDURE_TLS_CERT", "PERDURE_TLS_KEY")
        ]
        return cls(*paths)

    def check_pair(self) -> None:
        """A certificate without its key (or the reverse) is an error, not plaintext."""
        if self.cert is not None and self.key is None:
            raise TLSConfigError(
                f"PERDURE_TLS_CERT is set ({self.cert}) but PERDURE_TLS_KEY is not: "
                "set both or neither"
            )
        if self.key is not None and self.cert is None:
            raise TLSConfigError(
                f"PERDURE_TLS_KEY is set ({self.key}) but PERDURE_TLS_CERT is not: "
                "set both or neither"
            )


def read_pem(variable: str, path: Path) -> bytes:
    """The contents of the file a PERDURE_TLS_* variable names, or an error naming both."""
    try:
        return path.read_bytes()
    except OSError as error:
        raise TLSConfigError(f"{variable}={path}: cannot read it ({error.strerror})") from None


def channel_credentials() -> grpc.ChannelCredentials | None:
    """TLS credentials from PERDURE_TLS_*, or None (plaintext) when PERDURE_TLS_CA is unset."""
    files = TLSFiles.from_env()
    if files.ca is None:
        return None
    files.check_pair()
    key = cert = None
    if files.cert is not None and files.key is not None:
        cert = read_pem("PERDURE_TLS_CERT", files.cert)
        key = read_pem("PERDURE_TLS_KEY", files.key)
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem("PERDURE_TLS_CA", files.ca),
        private_key=key,
        certificate_chain=cert,
    )


def aio_channel(
    address: str,
    options: Sequence[tuple[str, Any]] = (),
    *,
    api_key: str | None = None,
    metadata: Sequence[tuple[str, str]] = (),
) -> grpc.aio.Channel:
    """A grpc.aio channel (TLS per PERDURE_TLS_*) whose calls carry the trace context,
    `api_key` as a bearer token when given, and `metadata` (a service's credential)."""
    interceptors = [
        *_client_interceptors(aio=True),
        *(aio_bearer(api_key) if api_key else []),
        *(aio_metadata(metadata) if metadata else []),
    ]
    credentials = channel_credentials()
    options = [*_CHANNEL_DEFAULTS, *options]
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
    return grpc.aio.secure_channel(address, credentials, options=options, interceptors=interceptors)


def sync_channel(
    address: str,
    options: Sequence[tuple[str, Any]] = (),
    *,
    api_key: str | None = None,
    traced: bool = True,
) -> grpc.Channel:
    """A blocking channel (TLS per PERDURE_TLS_*) whose calls carry the trace context (unless
    not `traced`: a poll's spans would bury the traces that matter), and `api_key` as a bearer
    token when given."""
    credentials = channel_credentials()
    options = [*_CHANNEL_DEFAULTS, *options]
    channel = (
        grpc.insecure_channel(address, options=options)
        if credentials is None
        else grpc.secure_channel(address, credentials, options=options)
    )
    if api_key:
        channel = sync_bearer(channel, api_key)
    interceptors = _client_interceptors(aio=False) if traced else []
    return grpc.intercept_channel(channel, *interceptors) if interceptors else channel


def multiplexed_call_span(
    service: str, method: str, kind: SpanKind, parent: Context | None = None
) -> AbstractContextManager[Span]:
    """The span a unary call of `service`/`method` gets from the interceptors, for the same
    call sent as a message on a stream: one name in traces, whichever way it travelled."""
    attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
    return _tracer.start_as_current_span(
        f"/{service}/{method}", parent, kind=kind, attributes=attributes
    )
