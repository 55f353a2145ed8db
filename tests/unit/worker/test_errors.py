"""Every error the SDK raises or exports is a PerdureError, and is caught as before."""

from __future__ import annotations

import inspect
from typing import Any

import grpc
import pytest

import perdure.client
import perdure.worker
from perdure.client import PerdureError, RpcError, WaitTimeoutError
from perdure.worker import (
    JournalRejectedError,
    LeaseLostError,
    NonDeterminismError,
    SignalTimeoutError,
    StepFailedError,
    WorkflowCancelledError,
)
from perdure.worker._errors import JournalUnavailableError
from perdure.worker._session import JournalCallError

# Errors that workflow code's `except Exception` must not swallow, as asyncio.CancelledError.
NOT_EXCEPTIONS = (WorkflowCancelledError, NonDeterminismError, LeaseLostError)
METADATA: Any = (("grpc-status-details-bin", b"..."),)


def exported_errors() -> list[type[BaseException]]:
    found = []
    for module in (perdure.worker, perdure.client):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found.append(value)
    return found


def test_every_exported_error_is_a_perdure_error() -> None:
    errors = exported_errors()
    assert len(errors) >= 12
    assert all(issubclass(error, PerdureError) for error in errors), errors
    assert perdure.worker.PerdureError is perdure.client.PerdureError


def test_the_errors_are_caught_as_before() -> None:
    for error in (StepFailedError, SignalTimeoutError, JournalRejectedError, JournalCallError):
        assert issubclass(error, Exception)
    for control in (*NOT_EXCEPTIONS, JournalUnavailableError):
        assert not issubclass(control, Exception)
    assert issubclass(WaitTimeoutError, TimeoutError)
    assert issubclass(RpcError, grpc.RpcError)


def test_an_api_error_keeps_the_status_of_the_call() -> None:
    class Failed(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.NOT_FOUND

        def details(self) -> str | None:
            return "no workflow 'x'"

        def trailing_metadata(self) -> Any:
            return METADATA

    with pytest.raises(grpc.RpcError) as caught:
        raise RpcError(Failed())
    assert isinstance(caught.value, PerdureError)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert caught.value.details() == "no workflow 'x'"
    assert caught.value.trailing_metadata() is METADATA
    assert str(caught.value) == "NOT_FOUND: no workflow 'x'"
