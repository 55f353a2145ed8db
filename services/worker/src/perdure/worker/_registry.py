"""The @workflow and @remote_step decorators."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from perdure.worker._retry import RetryPolicy

WorkflowFunction = Callable[..., Awaitable[Any]]
StepFunction = Callable[[Any], Any]
F = TypeVar("F", bound=WorkflowFunction)
S = TypeVar("S", bound=StepFunction)

_ATTRIBUTE = "__perdure_workflow__"
_RETRY_ATTRIBUTE = "__perdure_retry__"
_STEP_ATTRIBUTE = "__perdure_remote_step__"


@overload
def workflow(fn: F, /) -> F: ...
@overload
def workflow(*, name: str | None = None, retry: RetryPolicy | None = None) -> Callable[[F], F]: ...


def workflow(
    fn: F | None = None, /, *, name: str | None = None, retry: RetryPolicy | None = None
) -> F | Callable[[F], F]:
    """Mark an async function `fn(ctx, input)` (or `fn(ctx)`) as a workflow.

    Use as `@workflow` or `@workflow(name="type-name", retry=RetryPolicy(...))`; the type name
    defaults to the function's name, and `retry` is the default policy of its steps.
    """

    def mark(function: F) -> F:
        setattr(function, _ATTRIBUTE, name or function.__name__)
        setattr(function, _RETRY_ATTRIBUTE, retry or RetryPolicy())
        return function

    return mark(fn) if fn is not None else mark


def workflow_name(fn: Any) -> str | None:
    """The workflow type a function was registered as, or None."""
    value = getattr(fn, _ATTRIBUTE, None)
    return value if isinstance(value, str) else None


def workflow_retry(fn: Any) -> RetryPolicy:
    """The default retry policy of a workflow's steps."""
    value = getattr(fn, _RETRY_ATTRIBUTE, None)
    return value if isinstance(value, RetryPolicy) else RetryPolicy()


@overload
def remote_step(fn: S, /) -> S: ...
@overload
def remote_step(*, name: str | None = None) -> Callable[[S], S]: ...


def remote_step(fn: S | None = None, /, *, name: str | None = None) -> S | Callable[[S], S]:
    """Mark a function `fn(input)` (sync or async) as a step type a worker given it executes
    for workflows anywhere (`ctx.call(name, input)`, in any language). The type name defaults
    to the function's name. Inside, `current_step()` gives its idempotency key and attempt,
    and `heartbeat(details)` reports progress."""

    def mark(function: S) -> S:
        setattr(function, _STEP_ATTRIBUTE, name or function.__name__)
        return function

    return mark(fn) if fn is not None else mark


def remote_step_name(fn: Any) -> str | None:
    """The step type a function was registered as, or None."""
    value = getattr(fn, _STEP_ATTRIBUTE, None)
    return value if isinstance(value, str) else None
