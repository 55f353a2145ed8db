"""The client raises a typed error for every public error reason, read from the ErrorInfo
detail of the status (and by status code when a proxy answered without one)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

import perdure.client
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import (
    AlreadyStartedError,
    RpcError,
    UnavailableError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowParkedError,
)
from perdure.client._errors import REASON_ERRORS, api_error
from perdure.client._requests import outcome
from perdure.common.errors import ApiError
from perdure.common.reasons import INTERNAL_REASONS, Reason


class _Failed(grpc.RpcError):
    """A failed call as grpc raises it: code, details and the rich status's trailing
    metadata."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str = "") -> None:
        self._code, self._message = code, message
        self._trailing = ApiError(code, reason, message).to_status().trailing_metadata
        if not reason:
            self._trailing = ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._message

    def trailing_metadata(self) -> Any:
        return self._trailing


@pytest.mark.parametrize("reason", sorted(set(Reason) - INTERNAL_REASONS))
def test_every_public_reason_raises_its_typed_error(reason: Reason) -> None:
    expected = REASON_ERRORS[reason]
    assert expected is not RpcError  # a type of its own, below the base
    error = api_error(_Failed(grpc.StatusCode.FAILED_PRECONDITION, "why it failed", reason))
    assert type(error) is expected
    assert isinstance(error, perdure.client.PerdureError) and isinstance(error, grpc.RpcError)
    assert (error.code(), error.reason, error.message) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        reason,
        "why it failed",
    )
    assert expected.__name__ in perdure.client.__all__


def test_the_reason_table_names_only_known_reasons() -> None:
    assert set(REASON_ERRORS) == {str(r) for r in set(Reason) - INTERNAL_REASONS}


def test_a_status_without_a_reason_is_typed_by_its_code() -> None:
    error = api_error(_Failed(grpc.StatusCode.UNAVAILABLE, "connection refused"))
    assert isinstance(error, UnavailableError) and error.reason == ""
    not_found = api_error(_Failed(grpc.StatusCode.NOT_FOUND, "x", Reason.WORKFLOW_NOT_FOUND))
    assert isinstance(not_found, WorkflowNotFoundError)
    conflict = api_error(_Failed(grpc.StatusCode.ALREADY_EXISTS, "x", Reason.WORKFLOW_ID_CONFLICT))
    assert isinstance(conflict, AlreadyStartedError)


def test_a_closed_run_is_its_value_or_its_typed_outcome() -> None:
    completed = wf.WorkflowInfo(status=wf.WORKFLOW_STATUS_COMPLETED)
    completed.result.encoding, completed.result.data = "json/plain", b'{"n": 3, "x": [1.5]}'
    value = outcome(completed)
    assert value == {"n": 3, "x": [1.5]} and type(value["n"]) is int
    failed = wf.WorkflowInfo(
        workflow_id="w",
        status=wf.WORKFLOW_STATUS_FAILED,
        failure=wf.Failure(type="ValueError", message="bad"),
    )
    with pytest.raises(WorkflowFailedError) as caught:
        outcome(failed)
    assert (caught.value.error_type, caught.value.message) == ("ValueError", "bad")
    failed.status = wf.WORKFLOW_STATUS_PARKED
    with pytest.raises(WorkflowParkedError):
        outcome(failed)
