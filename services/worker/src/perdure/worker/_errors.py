"""Exceptions the SDK raises into workflow code and its own control flow."""

from __future__ import annotations

from perdure.api.workflow.v1 import workflow_pb2 as wf


class PerdureError(BaseException):
    """The base of every error the Perdure SDK raises or exports (worker and client).

    Most are also an `Exception`. A few are not, as asyncio.CancelledError is not, so that
    `except Exception` in workflow code cannot swallow them: WorkflowCancelledError,
    NonDeterminismError, LeaseLostError, JournalUnavailableError. `except PerdureError` does
    catch those: re-raise them.
    """


class StepFailedError(PerdureError, Exception):
    """A step raised; raised again, identically, when the workflow is replayed.

    The original exception cannot be rebuilt on another worker, so workflow code catches this
    type and reads `error_type` and `message`.
    """

    def __init__(self, step_id: str, failure: wf.Failure) -> None:
        super().__init__(f"step {step_id!r} failed: {failure.type}: {failure.message}")
        self.step_id = step_id
        self.error_type = failure.type
        self.message = failure.message
        self.failure = failure


class BudgetExceededError(StepFailedError):
    """A remote step failed without running: its estimate did not fit a budget (the run's, a
    key's or the namespace's) and its run starts with on_budget_exceeded "fail". `message`
    names the budget and by how much. Never retried."""


# The failure type a step task records for a step refused by a budget (worker-protocol.md §27).
BUDGET_EXCEEDED = "BudgetExceeded"
# Recorded step failures raised as a StepFailedError subclass, by failure type.
_STEP_FAILURES: dict[str, type[StepFailedError]] = {BUDGET_EXCEEDED: BudgetExceededError}


def step_failed(step_id: str, failure: wf.Failure) -> StepFailedError:
    """The error a recorded step failure raises into workflow code: by its type, a typed
    StepFailedError (BudgetExceededError), else StepFailedError itself."""
    return _STEP_FAILURES.get(failure.type, StepFailedError)(step_id, failure)


class ChildWorkflowFailedError(PerdureError, Exception):
    """A child workflow (ctx.child, ctx.start_child) did not complete: it failed, was
    cancelled, terminated, or could not start because an open run holds its workflow id
    (`error_type` "WorkflowAlreadyStarted"). Raised again, identically, on replay.

    `error_type` and `message` are the child's failure (its own error's type for a failed
    child, "WorkflowCancelledError" for a cancelled one, "Terminated" for a terminated one);
    `status` the child's final status ("FAILED", "CANCELLED", "TERMINATED"; "" when it never
    started); `workflow_id` and `run_id` the child's (run id "" when it never started);
    `step_id` the child call's step id in the parent's journal.
    """

    def __init__(
        self, step_id: str, failure: wf.Failure, workflow_id: str, run_id: str, status: str
    ) -> None:
        super().__init__(
            f"child workflow {workflow_id!r} ({step_id!r}) did not complete: "
            f"{failure.type}: {failure.message}"
        )
        self.step_id = step_id
        self.error_type = failure.type
        self.message = failure.message
        self.failure = failure
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.status = status


class StepTimeoutError(PerdureError, Exception):
    """A step attempt ran longer than its `timeout` (start to close); counts as a failed
    attempt."""


class StepHeartbeatTimeoutError(PerdureError, Exception):
    """A step attempt went longer than its `heartbeat_timeout` without calling heartbeat();
    counts as a failed attempt."""


class WorkerLostError(PerdureError, Exception):
    """A step attempt started (it is journaled) and never reported: the worker running it was
    lost (it crashed, or its lease expired). Counts as a failed attempt, under the step's retry
    policy; never raised by a body, only recorded for it on replay."""


class SignalTimeoutError(PerdureError, Exception):
    """`ctx.wait_for_signal(name, timeout=...)` reached its timeout without a signal."""


class WorkflowCancelledError(PerdureError):
    """Raised into the workflow at its next durable call after CancelWorkflow (a waiting
    workflow is woken for it at once). Catch it to run compensating steps, then re-raise it to
    end the run as CANCELLED; returning normally completes the run instead.

    A BaseException, like asyncio.CancelledError, so that `except Exception` does not swallow
    it by accident.
    """


class NonDeterminismError(PerdureError):
    """The workflow code no longer matches its journal; the run is parked, not corrupted.

    A BaseException so that `except Exception` in workflow code cannot swallow it.

    Where it is known: `position`, the call at which code and journal part; `expected`, what
    the journal recorded there (event kind and step id, "" if nothing); `found`, the code's
    call there (kind and step id, or how the code ended).
    """

    def __init__(
        self, message: str, *, position: int | None = None, expected: str = "", found: str = ""
    ) -> None:
        super().__init__(message)
        self.position = position
        self.expected = expected
        self.found = found


class LeaseLostError(PerdureError):
    """Another worker now holds the workflow (history rejected our fence); stop at once."""


class JournalUnavailableError(PerdureError):
    """History could not be reached: the run stops and its lease is left to expire, so it is
    retried later. A BaseException so that workflow code cannot mistake it for its own error."""


class JournalRejectedError(PerdureError, Exception):
    """History refused a journal call as invalid (a value over the payload limits, say):
    sending it again cannot help. In a step it fails the step; elsewhere the workflow code
    gets it, and unhandled it fails the workflow."""


class StreamBufferFullError(PerdureError, Exception):
    """`current_step().emit(chunk)` in an async step found too many of the attempt's chunks not
    yet stored by history (50,000 chunks or 32 MiB): the step emits in a loop that never lets
    the event loop run (so nothing is sent), or history cannot keep up or be reached. Raised
    into the step body, so the attempt fails (and is retried under its policy) instead of
    holding an unbounded buffer. A sync step's emit waits for room instead."""


class WorkerConfigurationError(PerdureError, Exception):
    """The worker cannot serve as configured, and retrying will not help: its key is missing,
    invalid, revoked or not a worker key of this namespace and queue, or an address does not
    resolve. `Worker.run()` raises it; `perdure worker` prints it and exits non-zero."""


class ApprovalExpiredError(PerdureError, Exception):
    """ctx.approval reached its expiry with no decision (judged on the database clock, never
    early); raised again, identically, on every replay. `expires_at` is when it was due to
    expire, `expired_at` when history recorded it (never earlier)."""

    def __init__(self, approval_id: str, name: str, expires_at: str, expired_at: str) -> None:
        super().__init__(
            f"approval {name!r} ({approval_id}) expired at {expired_at} with no decision"
        )
        self.approval_id = approval_id
        self.name = name
        self.expires_at = expires_at
        self.expired_at = expired_at
