"""Call Perdure's public API: start workflows, wait for their results, watch them and read
their output streams. `Client` (blocking) and `AsyncClient` (asyncio) have the same surface and
hand out handles (WorkflowHandle, AsyncWorkflowHandle). Payloads in the answers (input, result,
outputs, state) decode with from_payload; result() decodes the result itself. A failed call
raises a typed RpcError (a PerdureError and a grpc.RpcError) chosen by the error's reason.
A start may set flow control's keys, priority, fairness key and `Budget`."""

from perdure.client._async_client import AsyncClient
from perdure.client._client import Client
from perdure.client._errors import (
    AlreadyStartedError,
    ApprovalRefusedError,
    AuthenticationError,
    FencedError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    RpcError,
    RunNotFoundError,
    ScheduleExistsError,
    SignalAlreadyConsumedError,
    StepNotInJournalError,
    UnavailableError,
    WaitTimeoutError,
    WorkflowCancelledError,
    WorkflowClosedError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowNotParkedError,
    WorkflowOpenError,
    WorkflowOutcomeError,
    WorkflowParkedError,
    WorkflowTerminatedError,
    WorkflowTimeoutError,
    WorkflowTypeNotRegisteredError,
)
from perdure.client._handle import AsyncWorkflowHandle, WorkflowHandle
from perdure.client._stream import Frame, StreamText
from perdure.worker._errors import PerdureError
from perdure.worker._flow import Budget
from perdure.worker._payload import from_payload, to_payload

__all__ = [
    "AlreadyStartedError",
    "ApprovalRefusedError",
    "AsyncClient",
    "AsyncWorkflowHandle",
    "AuthenticationError",
    "Budget",
    "Client",
    "FencedError",
    "Frame",
    "InternalError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PerdureError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RpcError",
    "RunNotFoundError",
    "ScheduleExistsError",
    "SignalAlreadyConsumedError",
    "StepNotInJournalError",
    "StreamText",
    "UnavailableError",
    "WaitTimeoutError",
    "WorkflowCancelledError",
    "WorkflowClosedError",
    "WorkflowFailedError",
    "WorkflowHandle",
    "WorkflowNotFoundError",
    "WorkflowNotParkedError",
    "WorkflowOpenError",
    "WorkflowOutcomeError",
    "WorkflowParkedError",
    "WorkflowTerminatedError",
    "WorkflowTimeoutError",
    "WorkflowTypeNotRegisteredError",
    "from_payload",
    "to_payload",
]
