"""ApiError's rich status: code, message and exactly one ErrorInfo, and the unary decorator."""

from __future__ import annotations

from typing import Any, NoReturn, cast

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2, status_pb2

from perdure.common import errors
from perdure.common.errors import ApiError

DETAILS_KEY = "grpc-status-details-bin"


def decode_details(metadata: Any) -> status_pb2.Status:
    """The google.rpc.Status carried by exactly one grpc-status-details-bin entry."""
    entries = [value for key, value in metadata if key == DETAILS_KEY]
    assert len(entries) == 1, metadata
    assert isinstance(entries[0], bytes)
    return status_pb2.Status.FromString(entries[0])


def error_infos(status: status_pb2.Status) -> list[error_details_pb2.ErrorInfo]:
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info), detail.type_url
        infos.append(info)
    return infos


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", "workflow_id is required"),
        (grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND", "no workflow with id 'x'"),
        (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE", "stale fence 3 — ünïcode ok"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "PAYLOAD_TOO_LARGE", "input is 3000000 bytes"),
        (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT", ""),
    ],
)
def test_to_status_carries_code_message_and_one_error_info(
    code: grpc.StatusCode, reason: str, message: str
) -> None:
    status = ApiError(code, reason, message).to_status()

    assert status.code == code
    assert status.details == message
    rich = decode_details(status.trailing_metadata)
    assert rich.code == code.value[0]
    assert rich.message == message
    assert len(rich.details) == 1
    assert rich.details[0].Is(error_details_pb2.ErrorInfo.DESCRIPTOR)
    [info] = error_infos(rich)
    assert info.domain == "perdure.dev" == errors.ERROR_DOMAIN
    assert info.reason == reason
    assert not info.metadata


def test_api_error_is_an_exception_with_its_message() -> None:
    error = ApiError(grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND", "no such run")
    assert str(error) == "no such run"
    assert (error.code, error.reason, error.message) == (
        grpc.StatusCode.NOT_FOUND,
        "WORKFLOW_NOT_FOUND",
        "no such run",
    )


def test_helpers_pick_their_codes() -> None:
    invalid = errors.invalid_argument("bad field")
    assert (invalid.code, invalid.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    custom = errors.invalid_argument("bad token", reason="INVALID_PAGE_TOKEN")
    assert custom.reason == "INVALID_PAGE_TOKEN"
    assert errors.not_found("R", "m").code == grpc.StatusCode.NOT_FOUND
    assert errors.failed_precondition("R", "m").code == grpc.StatusCode.FAILED_PRECONDITION
    assert errors.already_exists("R", "m").code == grpc.StatusCode.ALREADY_EXISTS


# --- the unary decorator -------------------------------------------------------------------------


class AbortedError(Exception):
    """What the fake context raises from abort(), as grpc's does."""


class FakeContext:
    def __init__(self) -> None:
        self.aborted: tuple[grpc.StatusCode, str, Any] | None = None

    async def abort(self, code: grpc.StatusCode, details: str, metadata: Any = ()) -> NoReturn:
        self.aborted = (code, details, metadata)
        raise AbortedError


def as_context(fake: FakeContext) -> grpc.aio.ServicerContext[Any, Any]:
    return cast("grpc.aio.ServicerContext[Any, Any]", fake)


class Servicer:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    @errors.unary
    async def Call(self, request: str, context: Any) -> str:
        if self.error is not None:
            raise self.error
        return request.upper()


async def test_unary_passes_responses_through() -> None:
    context = FakeContext()
    assert await Servicer(None).Call("hi", as_context(context)) == "HI"
    assert context.aborted is None


async def test_unary_turns_api_error_into_a_rich_status() -> None:
    context = FakeContext()
    error = errors.failed_precondition("STALE_FENCE", "stale fence 1")
    with pytest.raises(AbortedError):
        await Servicer(error).Call("x", as_context(context))
    assert context.aborted is not None
    code, details, metadata = context.aborted
    assert (code, details) == (grpc.StatusCode.FAILED_PRECONDITION, "stale fence 1")
    [info] = error_infos(decode_details(metadata))
    assert (info.domain, info.reason) == ("perdure.dev", "STALE_FENCE")


async def test_unary_passes_a_downstream_status_on_unchanged() -> None:
    downstream = ApiError(grpc.StatusCode.NOT_FOUND, "WORKFLOW_NOT_FOUND", "gone").to_status()
    rpc_error = grpc.aio.AioRpcError(
        grpc.StatusCode.NOT_FOUND,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*downstream.trailing_metadata),
        details="gone",
    )
    context = FakeContext()
    with pytest.raises(AbortedError):
        await Servicer(rpc_error).Call("x", as_context(context))
    assert context.aborted is not None
    code, details, metadata = context.aborted
    assert (code, details) == (grpc.StatusCode.NOT_FOUND, "gone")
    [info] = error_infos(decode_details(metadata))
    assert info.reason == "WORKFLOW_NOT_FOUND"


async def test_unary_lets_unexpected_errors_propagate() -> None:
    context = FakeContext()
    with pytest.raises(KeyError):
        await Servicer(KeyError("bug")).Call("x", as_context(context))
    assert context.aborted is None


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
    ],
    ids=["terminated", "connection lost", "deadlock"],
)
async def test_unary_answers_a_passing_database_failure_unavailable(error: Exception) -> None:
    # Not UNKNOWN with the driver's exception: UNAVAILABLE, which callers (and workers, for a
    # journal call) retry, saying why and what to do.
    context = FakeContext()
    with pytest.raises(AbortedError):
        await Servicer(error).Call("x", as_context(context))
    assert context.aborted is not None
    code, details, _ = context.aborted
    assert code == grpc.StatusCode.UNAVAILABLE
    first_line = str(error).splitlines()[0]
    assert details == (
        f"the database failed this call for a passing reason ({first_line}); call again"
    )


async def test_unary_lets_a_database_error_that_is_a_bug_propagate() -> None:
    # A statement the database refuses (a syntax error, a violated constraint) is no passing
    # failure: calling again would fail again.
    context = FakeContext()
    with pytest.raises(psycopg.errors.SyntaxError):
        await Servicer(psycopg.errors.SyntaxError("syntax error")).Call("x", as_context(context))
    assert context.aborted is None
