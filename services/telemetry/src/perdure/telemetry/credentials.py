"""Credentials on every call of a channel, as metadata added by client interceptors (over
plaintext and TLS alike), for unary and streaming calls: an API key (`authorization: Bearer
<token>`), or a service's internal secret."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc


def _with_token(metadata: Any, token: str) -> list[tuple[str, str]]:
    return _with(metadata, (("authorization", f"Bearer {token}"),))


def _with(metadata: Any, entries: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The call's metadata with `entries`, which replace any of the same names."""
    names = {name for name, _ in entries}
    return [*((k, v) for k, v in (metadata or ()) if k not in names), *entries]


class _AioMetadata:
    def __init__(self, entries: Sequence[tuple[str, str]]) -> None:
        self._entries = tuple(entries)

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            grpc.aio.Metadata(*_with(details.metadata, self._entries)),
            details.credentials,
            details.wait_for_ready,
        )


# grpc.aio files each interceptor under the first call shape it implements: one class each.
class _AioUnaryUnary(_AioMetadata, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


class _AioUnaryStream(_AioMetadata, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


class _AioStreamUnary(_AioMetadata, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._details(details), request_iterator)


class _AioStreamStream(_AioMetadata, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(self._details(details), request_iterator)


def aio_metadata(entries: Sequence[tuple[str, str]]) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for a grpc.aio channel that send `entries` with every call."""
    shapes = (_AioUnaryUnary, _AioUnaryStream, _AioStreamUnary, _AioStreamStream)
    return [shape(entries) for shape in shapes]


def aio_bearer(token: str) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for a grpc.aio channel that send `token` with every call."""
    return aio_metadata((("authorization", f"Bearer {token}"),))


class _Details(grpc.ClientCallDetails):
    def __init__(self, details: grpc.ClientCallDetails, token: str) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = tuple(_with_token(details.metadata, token))
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)


class _SyncBearer(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, token: str) -> None:
        self._token = token

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_Details(details, self._token), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_Details(details, self._token), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_Details(details, self._token), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(_Details(details, self._token), requests)


def sync_bearer(channel: grpc.Channel, token: str) -> grpc.Channel:
    """A blocking channel that sends `token` with every call."""
    return grpc.intercept_channel(channel, _SyncBearer(token))
