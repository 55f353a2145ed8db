"""The @workflow decorator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from perdure.worker._retry import RetryPolicy

WorkflowFunction = Callable[..., Awaitable[Any]]
F = TypeVar("F", bound=WorkflowFunction)

_ATTRIBUTE = "__perdure_workflow__"
_RETRY_ATTRIBUTE = "__perdure_retry__"


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
