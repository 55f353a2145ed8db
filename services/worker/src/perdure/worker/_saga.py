"""Sagas: compensations registered as a workflow goes, run as durable steps in reverse order
when the block fails or the run is cancelled (worker-protocol.md §30)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from perdure.worker._context import WorkflowContext, _check_name
from perdure.worker._errors import StepFailedError, WorkflowCancelledError
from perdure.worker._retry import RetryPolicy


@dataclass(frozen=True)
class _Compensation:
    """One registered compensation: how to run it as a durable call."""

    name: str
    run: Callable[[], Awaitable[Any]]


class Saga:
    """Compensations for the work a block has done, undone if the block does not finish.

        async with ctx.saga() as saga:
            await ctx.step("reserve", reserve, order)
            saga.add_compensation("release", release, order)
            await ctx.step("charge", charge, order)
            saga.add_compensation("refund", refund, order)
            await ctx.step("ship", ship, order)

    When the block raises an `Exception` or the run's cancellation (WorkflowCancelledError),
    the compensations run in reverse order of registration, each a durable step (local,
    `add_compensation`, or remote, `add_remote_compensation`): journaled, so a replay after a
    crash returns those done and goes on with the next. A cancel request that arrives while
    they run waits until they are all done. A compensation that fails after its retries does
    not stop the others; the block's own error is raised again at the end, carrying the
    failures (`compensation_failures`, a tuple of StepFailedError, and a note each).
    Suspending, continuing as new, a lost lease or non-determinism compensate nothing: they
    are not the workflow failing.
    """

    def __init__(self, ctx: WorkflowContext) -> None:
        self._ctx = ctx
        self._compensations: list[_Compensation] = []

    def add_compensation(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Register `ctx.step(name, fn, *args, **kwargs)` (with `retry`, `timeout`) to run if
        the saga compensates. Nothing runs or is journaled now."""
        _check_name(name)
        if not callable(fn):
            raise TypeError(f"compensation {name!r} needs a function, not {fn!r}")
        ctx = self._ctx

        async def run() -> Any:
            return await ctx.step(name, fn, *args, retry=retry, timeout=timeout, **kwargs)

        self._compensations.append(_Compensation(name, run))

    def add_remote_compensation(
        self,
        step_type: str,
        input: Any = None,
        *,
        task_queue: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register the remote step `ctx.call(step_type, input, task_queue=...)` to run if the
        saga compensates. The call is checked now; nothing is journaled until it runs."""
        ctx = self._ctx
        ctx.call(step_type, input, task_queue=task_queue, retry=retry, timeout=timeout)

        async def run() -> Any:
            return await ctx.call(
                step_type, input, task_queue=task_queue, retry=retry, timeout=timeout
            )

        self._compensations.append(_Compensation(step_type, run))

    async def compensate(self) -> tuple[StepFailedError, ...]:
        """Run the registered compensations now, last registered first, each once; return the
        failures of those that failed after their retries. The saga is empty afterwards."""
        pending, self._compensations = self._compensations, []
        failures: list[StepFailedError] = []
        with self._ctx.hold_cancellation():
            for compensation in reversed(pending):
                try:
                    await compensation.run()
                except StepFailedError as failure:
                    failures.append(failure)
        return tuple(failures)

    async def __aenter__(self) -> Saga:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if error is None or not isinstance(error, Exception | WorkflowCancelledError):
            return False
        failures = await self.compensate()
        for failure in failures:
            error.add_note(f"compensation {failure.step_id!r} failed too: {failure}")
        # An exception type that takes no attributes has the notes alone.
        with contextlib.suppress(AttributeError):
            setattr(error, "compensation_failures", failures)  # noqa: B010 - any exception type
        return False  # the block's error goes on
