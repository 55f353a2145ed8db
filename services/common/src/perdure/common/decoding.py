"""Requests that do not decode (corrupt bytes, invalid UTF-8 in a string, a wrong wire type)
are answered INVALID_ARGUMENT naming the message type, instead of gRPC's bare UNKNOWN: a
server's method handlers are wrapped as they are registered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from perdure.common import errors

Deserialize = Callable[[bytes], Any]


class Undecodable:
    """Stands for a request message that did not decode."""

    def __init__(self, type_name: str, error: DecodeError) -> None:
        self.type_name = type_name
        self.reason = str(error)

    def error(self) -> errors.ApiError:
        """The answer to such a request."""
        return errors.invalid_argument(
            f"the request is not a valid {self.type_name} message: {self.reason}"
        )


def tolerant(handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    """The same handler, answering undecodable requests with INVALID_ARGUMENT."""
    decode = _tolerant_deserializer(handler.request_deserializer)
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        unary: Any = handler.unary_unary  # async here, whatever the stubs say

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if isinstance(request, Undecodable):
                await errors.abort_with(context, request.error())
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, decode, serialize)
    if handler.stream_stream is not None:
        stream: Any = handler.stream_stream

        async def stream_stream(
            requests: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async for response in stream(requests, _CheckedReads(context)):
                yield response

        return grpc.stream_stream_rpc_method_handler(stream_stream, decode, serialize)
    return handler  # no other shape is served


class TolerantServer:
    """A server as `add_*Servicer_to_server` sees it: every handler registered is tolerant."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: tuple[grpc.GenericRpcHandler, ...]) -> None:
        """Register generic handlers, each method's made tolerant."""
        self._server.add_generic_rpc_handlers(tuple(_TolerantGeneric(h) for h in handlers))

    def add_registered_method_handlers(
        self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        """Register a service's method handlers, made tolerant."""
        tolerant_handlers = {name: tolerant(handler) for name, handler in handlers.items()}
        self._server.add_registered_method_handlers(service, tolerant_handlers)


class _TolerantGeneric(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self._inner = inner
        self._wrapped: dict[int, grpc.RpcMethodHandler[Any, Any]] = {}

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        if id(handler) not in self._wrapped:
            self._wrapped[id(handler)] = tolerant(handler)
        return self._wrapped[id(handler)]


class _CheckedReads:
    """A stream's context whose read() raises ApiError (INVALID_ARGUMENT) at an undecodable
    message: the handler ends the call with it, from whichever task reads."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def read(self) -> Any:
        message = await self._context.read()
        if isinstance(message, Undecodable):
            raise message.error()
        return message


def _tolerant_deserializer(deserialize: Deserialize | None) -> Deserialize | None:
    if deserialize is None:
        return None
    owner = getattr(deserialize, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    type_name = getattr(descriptor, "full_name", "request")

    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError as error:
            return Undecodable(type_name, error)

    return decode
