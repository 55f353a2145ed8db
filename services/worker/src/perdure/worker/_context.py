"""WorkflowContext: the durable calls workflow code makes, and their replay from the journal."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._errors import (
    JournalUnavailableError,
    LeaseLostError,
    NonDeterminismError,
    StepFailedError,
)
from perdure.worker._payload import failure_from, from_value, to_value
from perdure.worker._rpc import error_reason

log = logging.getLogger("perdure.worker")

JOURNAL_TIMEOUT = 30.0
_STEP_EVENTS = (wf.EVENT_TYPE_STEP_COMPLETED, wf.EVENT_TYPE_STEP_FAILED)
# Names of values the SDK records itself (ctx.now(), ctx.uuid()); user steps may not use "$".
_INTERNAL_PREFIX = "$"


@dataclass(frozen=True)
class StepContext:
    """What a running step may hand to the outside world."""

    workflow_id: str
    step_id: str
    idempotency_key: str
    fence: int
    attempt: int


_current_step: contextvars.ContextVar[StepContext] = contextvars.ContextVar("perdure_step")


def current_step() -> StepContext:
    """The step being executed: call from inside a step function for its idempotency key."""
    try:
        return _current_step.get()
    except LookupError:
        raise RuntimeError("current_step() is only available inside a running step") from None


class JournalClient:
    """The journal calls of one lease; a stale fence becomes LeaseLostError."""

    def __init__(self, stub: jgrpc.JournalServiceStub, workflow_id: str, fence: int) -> None:
        self._stub = stub
        self.workflow_id = workflow_id
        self.fence = fence

    async def load(self) -> jpb.LoadJournalResponse:
        """Load the journal, fencing out every earlier holder."""
        request = jpb.LoadJournalRequest(workflow_id=self.workflow_id, fence=self.fence)
        loaded: jpb.LoadJournalResponse = await self._call(self._stub.LoadJournal, request)
        return loaded

    async def record(self, request: jpb.RecordStepRequest) -> None:
        """Record a step outcome."""
        await self._call(self._stub.RecordStep, request)

    async def finish(self, request: jpb.FinishWorkflowRequest) -> None:
        """Close the run."""
        await self._call(self._stub.FinishWorkflow, request)

    async def _call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return await method(request, timeout=JOURNAL_TIMEOUT)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION and error_reason(error) in (
                "STALE_FENCE",
                "WORKFLOW_CLOSED",
            ):
                raise LeaseLostError(error.details() or "stale fence") from None
            raise JournalUnavailableError(f"{error.code().name}: {error.details()}") from error


class WorkflowContext:
    """Handed to every workflow function; its methods are the workflow's durable calls.

    Code outside steps must be deterministic: it runs again on every replay.
    """

    def __init__(
        self, info: wf.WorkflowInfo, events: list[wf.HistoryEvent], journal: JournalClient
    ) -> None:
        self.workflow_id = info.workflow_id
        self.workflow_type = info.workflow_type
        self.fence = journal.fence
        self._journal = journal
        self._recorded = {e.position: e for e in events if e.event_type in _STEP_EVENTS}
        self._position = 0
        self._occurrences: dict[str, int] = {}

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once and journal its JSON result.

        On replay a completed step returns its recorded result without running. A sync `fn`
        runs in a thread so heartbeats go on; an async one is awaited. If `fn` raises, the
        error is journaled and StepFailedError is raised here (and again on every replay).
        """
        if not isinstance(name, str) or not name or name.startswith(_INTERNAL_PREFIX):
            raise ValueError(
                f"step name must be a non-empty string not starting with '$': {name!r}"
            )
        return await self._durable(name, fn, args, kwargs)

    async def now(self) -> datetime:
        """The current UTC time, recorded once so that replay sees the same instant."""
        moment = await self._durable("$now", lambda: datetime.now(UTC).isoformat(), (), {})
        return datetime.fromisoformat(moment)

    async def uuid4(self) -> str:
        """A random UUID, recorded once so that replay sees the same value."""
        return str(await self._durable("$uuid", lambda: str(uuid.uuid4()), (), {}))

    def unconsumed_steps(self) -> list[str]:
        """Recorded steps the code has not reached: non-deterministic if the run is ending."""
        return [event.step_id for _, event in sorted(self._recorded.items())]

    async def _durable(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        occurrence = self._occurrences.get(name, 0) + 1
        self._occurrences[name] = occurrence
        step_id = name if occurrence == 1 else f"{name}#{occurrence}"
        position = self._position
        self._position += 1

        recorded = self._recorded.pop(position, None)
        if recorded is not None:
            if recorded.step_id != step_id:
                raise NonDeterminismError(
                    f"workflow {self.workflow_id!r}: call #{position} of the code is step "
                    f"{step_id!r}, but the journal recorded {recorded.step_id!r} there; the code "
                    "changed in a way that does not replay"
                )
            if not name.startswith(_INTERNAL_PREFIX):
                log.info("Skipping completed step: %s", step_id)
            if recorded.event_type == wf.EVENT_TYPE_STEP_FAILED:
                raise StepFailedError(step_id, recorded.failure)
            return from_value(recorded.payload)

        request = jpb.RecordStepRequest(
            workflow_id=self.workflow_id,
            fence=self.fence,
            step_id=step_id,
            step_name=name,
            position=position,
            attempt=1,
        )
        step = StepContext(
            workflow_id=self.workflow_id,
            step_id=step_id,
            idempotency_key=f"{self.workflow_id}:{step_id}",
            fence=self.fence,
            attempt=1,
        )
        token = _current_step.set(step)
        try:
            result = await _invoke(fn, args, kwargs)
            encoded = to_value(result)
        except Exception as error:
            request.failure.CopyFrom(failure_from(error))
            await self._journal.record(request)
            raise StepFailedError(step_id, request.failure) from error
        finally:
            _current_step.reset(token)
        request.output.CopyFrom(encoded)
        await self._journal.record(request)
        # Return the decoded JSON, exactly what a replay will return (tuples become lists).
        return from_value(encoded)


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


async def call_workflow(fn: Callable[..., Awaitable[Any]], ctx: WorkflowContext, arg: Any) -> Any:
    """Call a workflow function as `fn(ctx, input)`, or `fn(ctx)` if it takes no input."""
    if len(inspect.signature(fn).parameters) == 1:
        return await fn(ctx)
    return await fn(ctx, arg)
