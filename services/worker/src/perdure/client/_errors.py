"""The client's errors: a failed call as a typed RpcError chosen by the ErrorInfo reason the
service attached (the reasons of services/common/.../reasons.py, domain perdure.dev), and how
a run ended when it did not complete (raised by a handle's result())."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._errors import PerdureError

__all__ = [
    "AlreadyStartedError",
    "AuthenticationError",
    "FencedError",
    "InternalError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RpcError",
    "RunNotFoundError",
    "SignalAlreadyConsumedError",
    "StepNotInJournalError",
    "UnavailableError",
    "WaitTimeoutError",
    "WorkflowCancelledError",
    "WorkflowClosedError",
    "WorkflowFailedError",
    "WorkflowNotFoundError",
    "WorkflowNotParkedError",
    "WorkflowOutcomeError",
    "WorkflowParkedError",
    "WorkflowTerminatedError",
    "WorkflowTimeoutError",
    "WorkflowTypeNotRegisteredError",
    "api_error",
    "reason_of",
]


class RpcError(PerdureError, grpc.RpcError):
    """A call to the API failed: `code()` (the gRPC status), `reason` (the ErrorInfo reason a
    caller acts on, "" when the service gave none) and `message`. Also a grpc.RpcError, with
    the call's details() and trailing_metadata(). Raised as the subclass its reason names."""

    def __init__(self, cause: grpc.RpcError) -> None:
        code, details = _code_of(cause), _details_of(cause)
        super().__init__(f"{code.name}: {details}")
        self.cause = cause
        self.reason = reason_of(cause)
        self.message = details or ""

    def code(self) -> grpc.StatusCode:
        return _code_of(self.cause)

    def details(self) -> str | None:
        return _details_of(self.cause)

    def trailing_metadata(self) -> Any:
        return self.cause.trailing_metadata()


class InvalidRequestError(RpcError):
    """INVALID_ARGUMENT: a field of the request is malformed (the message names it); also
    INVALID_JSON and INVALID_PAGE_TOKEN. Sending it again fails again."""


class PayloadTooLargeError(InvalidRequestError):
    """A payload, message or body is over its limit (PAYLOAD_TOO_LARGE, MESSAGE_TOO_LARGE,
    BODY_TOO_LARGE)."""


class StepNotInJournalError(InvalidRequestError):
    """Reset or fork named a step the run's journal does not hold (STEP_NOT_IN_JOURNAL)."""


class AuthenticationError(RpcError):
    """UNAUTHENTICATED: no API key, or one that is malformed, unknown or revoked
    (API_KEY_MISSING, API_KEY_INVALID, API_KEY_NOT_FOUND, API_KEY_REVOKED)."""


class PermissionDeniedError(RpcError):
    """PERMISSION_DENIED: the key's role or namespace does not allow the call."""


class RateLimitedError(RpcError):
    """RESOURCE_EXHAUSTED: over a rate or count limit (RATE_LIMITED, TOO_MANY_FEEDS,
    SESSIONS_PER_KEY_EXCEEDED, STREAM_MESSAGE_RATE_EXCEEDED, AUTHENTICATION_FAILURE_RATE).
    Retry later."""


class NotFoundError(RpcError):
    """NOT_FOUND: what the call names does not exist (STATE_NOT_FOUND, PAYLOAD_NOT_FOUND,
    STEP_NOT_FOUND, TASK_QUEUE_NOT_FOUND, and the subclasses)."""


class WorkflowNotFoundError(NotFoundError):
    """No run has the workflow id in the namespace (WORKFLOW_NOT_FOUND)."""


class RunNotFoundError(NotFoundError):
    """The workflow id has no run with the run id given (RUN_NOT_FOUND)."""


class AlreadyStartedError(RpcError):
    """ALREADY_EXISTS: the workflow id is taken by a run started differently, or by an open run
    (WORKFLOW_ID_CONFLICT)."""


class ScheduleExistsError(RpcError):
    """ALREADY_EXISTS: the namespace has a schedule of that id (SCHEDULE_ID_CONFLICT)."""


class WorkflowClosedError(RpcError):
    """FAILED_PRECONDITION: the run is closed and takes no more signals, cancels or
    terminations (WORKFLOW_CLOSED)."""


class ApprovalRefusedError(RpcError):
    """FAILED_PRECONDITION: a decision the approval cannot take: its details changed since the
    decider saw them (APPROVAL_DETAILS_CHANGED), it was decided already (APPROVAL_DECIDED), or
    it expired (APPROVAL_EXPIRED)."""


class WorkflowNotParkedError(RpcError):
    """Resume asked of a run that is not parked (WORKFLOW_NOT_PARKED)."""


class WorkflowOpenError(RpcError):
    """FAILED_PRECONDITION: an import of a run that had not closed (WORKFLOW_OPEN)."""


class WorkflowTypeNotRegisteredError(RpcError):
    """No worker build registered the workflow type (WORKFLOW_TYPE_NOT_REGISTERED)."""


class SignalAlreadyConsumedError(RpcError):
    """The signal was consumed already (SIGNAL_ALREADY_CONSUMED)."""


class FencedError(RpcError):
    """A write of a worker whose lease is stale or closed was refused (STALE_FENCE,
    FENCE_NOT_LOADED, LEASE_NOT_HELD, STEP_CLOSED, STEP_CONFLICT): never a client's call."""


class UnavailableError(RpcError):
    """UNAVAILABLE: the service cannot be reached now; the call may be sent again."""


class InternalError(RpcError):
    """INTERNAL: a fault of the service's own, logged there (INTERNAL)."""


# Every public reason (Reason in perdure.common.reasons minus its INTERNAL_REASONS) and the
# error raised for it; tests/unit/worker/test_client_errors.py checks none is missing.
REASON_ERRORS: dict[str, type[RpcError]] = {
    "INVALID_REQUEST": InvalidRequestError,
    "INVALID_JSON": InvalidRequestError,
    "INVALID_PAGE_TOKEN": InvalidRequestError,
    "BODY_TOO_LARGE": PayloadTooLargeError,
    "MESSAGE_TOO_LARGE": PayloadTooLargeError,
    "PAYLOAD_TOO_LARGE": PayloadTooLargeError,
    "API_KEY_MISSING": AuthenticationError,
    "API_KEY_INVALID": AuthenticationError,
    "API_KEY_REVOKED": AuthenticationError,
    "API_KEY_NOT_FOUND": AuthenticationError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "AUTHENTICATION_FAILURE_RATE": RateLimitedError,
    "RATE_LIMITED": RateLimitedError,
    "STREAM_MESSAGE_RATE_EXCEEDED": RateLimitedError,
    "SESSIONS_PER_KEY_EXCEEDED": RateLimitedError,
    "TOO_MANY_FEEDS": RateLimitedError,
    "WORKFLOW_NOT_FOUND": WorkflowNotFoundError,
    "RUN_NOT_FOUND": RunNotFoundError,
    "WORKFLOW_ID_CONFLICT": AlreadyStartedError,
    "WORKFLOW_CLOSED": WorkflowClosedError,
    "WORKFLOW_TYPE_NOT_REGISTERED": WorkflowTypeNotRegisteredError,
    "STATE_NOT_FOUND": NotFoundError,
    "FLOW_LIMIT_NOT_FOUND": NotFoundError,
    "BUDGET_NOT_FOUND": NotFoundError,
    "TASK_QUEUE_NOT_FOUND": NotFoundError,
    "PAYLOAD_NOT_FOUND": NotFoundError,
    "STALE_FENCE": FencedError,
    "FENCE_NOT_LOADED": FencedError,
    "LEASE_NOT_HELD": FencedError,
    "STEP_NOT_FOUND": NotFoundError,
    "STEP_CLOSED": FencedError,
    "STEP_CONFLICT": FencedError,
    "SIGNAL_ALREADY_CONSUMED": SignalAlreadyConsumedError,
    "WORKFLOW_NOT_PARKED": WorkflowNotParkedError,
    "STEP_NOT_IN_JOURNAL": StepNotInJournalError,
    "SCHEDULE_NOT_FOUND": NotFoundError,
    "SCHEDULE_ID_CONFLICT": ScheduleExistsError,
    "INTERNAL": InternalError,
    "APPROVAL_NOT_FOUND": NotFoundError,
    "APPROVAL_DETAILS_CHANGED": ApprovalRefusedError,
    "APPROVAL_DECIDED": ApprovalRefusedError,
    "APPROVAL_EXPIRED": ApprovalRefusedError,
    "WORKFLOW_OPEN": WorkflowOpenError,
}

# A status without a reason (the transport's own, or a proxy's): by its code.
CODE_ERRORS: dict[grpc.StatusCode, type[RpcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RateLimitedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.INTERNAL: InternalError,
}


def api_error(cause: grpc.RpcError) -> RpcError:
    """The typed error of a failed call: by its reason, else by its status code."""
    if isinstance(cause, RpcError):
        return cause
    error_type = REASON_ERRORS.get(reason_of(cause)) or CODE_ERRORS.get(_code_of(cause), RpcError)
    return error_type(cause)


def reason_of(error: grpc.RpcError) -> str:
    """The ErrorInfo reason a Perdure service attached to a failed call, or ""."""
    # Sync calls give _Metadatum pairs and aio calls a Metadata mapping: both iterate as pairs.
    trailing: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else ()
    for key, value in trailing or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        try:
            details = status_pb2.Status.FromString(value).details
        except DecodeError:
            return ""
        for detail in details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return str(info.reason)
    return ""


def _code_of(error: grpc.RpcError) -> grpc.StatusCode:
    code = error.code() if hasattr(error, "code") else None
    return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _details_of(error: grpc.RpcError) -> str | None:
    details = error.details() if hasattr(error, "details") else None
    return str(details) if details is not None else None


class WorkflowTimeoutError(PerdureError, TimeoutError):
    """The run was still open when the wait's timeout ran out (a handle's result(timeout=...),
    Client.wait)."""


WaitTimeoutError = WorkflowTimeoutError  # its earlier name


class WorkflowOutcomeError(PerdureError, Exception):
    """The run closed without completing: result() has no value to return. `info` is the
    run's summary (its status, failure and run id)."""

    def __init__(self, message: str, info: wf.WorkflowInfo) -> None:
        super().__init__(message)
        self.info = info
        self.workflow_id = info.workflow_id
        self.run_id = info.run_id


class WorkflowFailedError(WorkflowOutcomeError):
    """The run failed: `failure` (a Failure: type, message, stack_trace), also as
    `error_type` and `message`."""

    def __init__(self, message: str, info: wf.WorkflowInfo) -> None:
        super().__init__(message, info)
        self.failure = info.failure
        self.error_type = info.failure.type
        self.message = info.failure.message


class WorkflowCancelledError(WorkflowOutcomeError):
    """The run ended cancelled (CancelWorkflow, its code re-raised the cancellation). Not the
    perdure.worker error of the same name that workflow code sees."""


class WorkflowTerminatedError(WorkflowOutcomeError):
    """The run was terminated (TerminateWorkflow)."""


class WorkflowParkedError(WorkflowFailedError):
    """The run is parked: its code no longer matches its journal (`failure` says where).
    Deploy the fixed code and resume it; result() then waits again."""
