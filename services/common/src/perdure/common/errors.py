"""Domain errors and their mapping onto gRPC statuses with a google.rpc.ErrorInfo detail."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import psycopg
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from perdure.common.reasons import Reason

ERROR_DOMAIN = "perdure.dev"


class ApiError(Exception):
    """An error a caller can act on: a gRPC code, a stable reason and a message."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def to_status(self) -> grpc.Status:
        """Build the rich status: the code, the message and one ErrorInfo detail."""
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=self.reason, domain=ERROR_DOMAIN))
        proto = status_pb2.Status(code=self.code.value[0], message=self.message, details=[detail])
        status: grpc.Status = rpc_status.to_status(proto)
        return status


def invalid_argument(message: str, reason: str = Reason.INVALID_REQUEST) -> ApiError:
    """A request field is malformed; the message names the field."""
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, reason, message)


def not_found(reason: str, message: str) -> ApiError:
    """The named entity does not exist."""
    return ApiError(grpc.StatusCode.NOT_FOUND, reason, message)


def failed_precondition(reason: str, message: str) -> ApiError:
    """The system is not in a state that allows the call."""
    return ApiError(grpc.StatusCode.FAILED_PRECONDITION, reason, message)


def already_exists(reason: str, message: str) -> ApiError:
    """The entity exists and differs from what the call asked for."""
    return ApiError(grpc.StatusCode.ALREADY_EXISTS, reason, message)


def database_unavailable(error: psycopg.OperationalError) -> ApiError:
    """The database failed a call for a passing reason: a connection lost (a restart, a
    failover, a terminated backend), a deadlock, a cancelled statement. UNAVAILABLE, which
    callers retry: a write either committed or not, and one carrying its id (a request id, a
    signal id) is applied once however often it is sent."""
    text = str(error).strip()
    why = text.splitlines()[0] if text else type(error).__name__
    return ApiError(
        grpc.StatusCode.UNAVAILABLE,
        "",
        f"the database failed this call for a passing reason ({why[:200]}); call again",
    )


def reason_of(error: grpc.aio.AioRpcError) -> str:
    """The ErrorInfo reason a failed call carries ("" when none)."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], error: Exception) -> None:
    """End the call with the status an error maps to; re-raises anything unexpected."""
    if isinstance(error, ApiError):
        status = error.to_status()
        await context.abort(status.code, status.details, status.trailing_metadata)
    if isinstance(error, grpc.aio.AioRpcError):
        # A downstream service already chose the status: pass it on unchanged, details included.
        await context.abort(
            error.code(), error.details() or "", tuple(error.trailing_metadata() or ())
        )
    raise error


Request = TypeVar("Request")
Response = TypeVar("Response")
Servicer = TypeVar("Servicer")
Handler = Callable[[Servicer, Request, grpc.aio.ServicerContext[Any, Any]], Awaitable[Response]]


def unary(method: Handler[Servicer, Request, Response]) -> Handler[Servicer, Request, Response]:
    """Decorate a unary servicer method so domain and downstream errors become statuses."""

    @functools.wraps(method)
    async def wrapper(
        self: Servicer, request: Request, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Response:
        try:
            return await method(self, request, context)
        except (ApiError, grpc.aio.AioRpcError) as error:
            await abort_with(context, error)
            raise  # unreachable: abort always raises
        except psycopg.OperationalError as error:
            await abort_with(context, database_unavailable(error))
            raise  # unreachable: abort always raises

    return wrapper


StreamHandler = Callable[
    [Servicer, Request, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Response]
]


def streaming(
    method: StreamHandler[Servicer, Request, Response],
) -> StreamHandler[Servicer, Request, Response]:
    """Decorate a server-streaming servicer method (an async generator) so domain and
    downstream errors become statuses, after the messages sent before them."""

    @functools.wraps(method)
    async def wrapper(
        self: Servicer, request: Request, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Response]:
        try:
            async for response in method(self, request, context):
                yield response
        except (ApiError, grpc.aio.AioRpcError) as error:
            await abort_with(context, error)
        except psycopg.OperationalError as error:
            await abort_with(context, database_unavailable(error))

    return wrapper
