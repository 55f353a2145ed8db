"""How one execution of a workflow function ends: result, failure or park."""

from __future__ import annotations

import contextlib
from typing import Any, cast

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import WorkflowContext
from perdure.worker._errors import JournalUnavailableError, LeaseLostError
from perdure.worker._journal import JournalClient
from perdure.worker._payload import to_payload
from perdure.worker._runner import _execute
from perdure.worker._session import JournalCallError
from tests.unit.worker.fake_journal import FakeJournal, make_context


def context(
    events: list[wf.HistoryEvent] | None = None, journal: FakeJournal | None = None
) -> WorkflowContext:
    return make_context(journal or FakeJournal(), events or [])


def completed(position: int, step_id: str, output: Any) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=position + 2,
        event_type=wf.EVENT_TYPE_STEP_COMPLETED,
        step_id=step_id,
        step_name=step_id,
        position=position,
        payload=to_payload(output),
    )


async def test_a_returning_workflow_gives_its_json_result() -> None:
    async def flow(ctx: WorkflowContext, arg: dict[str, int]) -> dict[str, Any]:
        doubled = await ctx.step("double", lambda: arg["n"] * 2)
        return {"doubled": doubled, "pair": (1, 2)}

    outcome, value = await _execute(flow, context(), {"n": 21})
    assert outcome == "result"
    assert value == to_payload({"doubled": 42, "pair": [1, 2]})


async def test_a_workflow_taking_only_ctx_is_called_without_input() -> None:
    async def flow(ctx: WorkflowContext) -> str:
        return ctx.workflow_id

    assert await _execute(flow, context(), {"ignored": True}) == ("result", to_payload("wf-1"))


async def test_a_raising_workflow_fails() -> None:
    async def flow(ctx: WorkflowContext, arg: Any) -> None:
        raise LookupError("no such customer")

    outcome, failure = await _execute(flow, context(), None)
    assert outcome == "failure"
    assert (failure.type, failure.message) == ("LookupError", "no such customer")


async def test_skipping_recorded_steps_parks_the_run() -> None:
    async def flow(ctx: WorkflowContext, arg: Any) -> str:
        await ctx.step("a", lambda: 1)
        return "done early"

    ctx = context([completed(0, "a", 1), completed(1, "b", 2)])
    outcome, failure = await _execute(flow, ctx, None)
    assert outcome == "park"
    assert failure.type == "NonDeterminismError"
    assert "b" in failure.message


async def test_non_determinism_parks_even_if_the_workflow_catches_exceptions() -> None:
    async def flow(ctx: WorkflowContext, arg: Any) -> str:
        try:
            await ctx.step("renamed", lambda: 1)
        except Exception:
            return "swallowed"
        return "unreachable"

    outcome, failure = await _execute(flow, context([completed(0, "original", 1)]), None)
    assert outcome == "park"
    assert "'renamed'" in failure.message and "'original'" in failure.message


async def test_non_determinism_parks_even_if_cleanup_code_raises_over_it() -> None:
    journal = FakeJournal()

    async def flow(ctx: WorkflowContext, arg: Any) -> str:
        try:
            await ctx.step("renamed", lambda: 1)
        except BaseException:
            with contextlib.suppress(BaseException):
                await ctx.step("cleanup", lambda: 2)  # refused: the code no longer replays
            raise LookupError("a failure over the mismatch") from None
        return "unreachable"

    ctx = context([completed(0, "original", 1)], journal)
    outcome, failure = await _execute(flow, ctx, None)
    assert outcome == "park"
    assert "'renamed'" in failure.message and "'original'" in failure.message
    assert journal.recorded == []  # nothing was recorded after the mismatch


async def test_a_journal_outage_is_not_a_workflow_failure() -> None:
    unavailable = JournalUnavailableError("UNAVAILABLE: history down")

    async def flow(ctx: WorkflowContext, arg: Any) -> int:
        return int(await ctx.step("a", lambda: 1))

    with pytest.raises(JournalUnavailableError):
        await _execute(flow, context(journal=FakeJournal(error=unavailable)), None)


async def test_a_non_finite_result_is_a_failure_not_a_result() -> None:
    async def flow(ctx: WorkflowContext, arg: Any) -> float:
        return float("nan")

    outcome, _ = await _execute(flow, context(), None)
    assert outcome == "failure"


class FailingSession:
    """A journal session whose calls fail with a given status."""

    def __init__(self, error: JournalCallError) -> None:
        self.error = error

    async def call(self, request: object, timeout: float) -> None:  # noqa: ASYNC109
        raise self.error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (JournalCallError(grpc.StatusCode.UNAVAILABLE, "x"), JournalUnavailableError),
        (
            JournalCallError(grpc.StatusCode.FAILED_PRECONDITION, "x", "STALE_FENCE"),
            LeaseLostError,
        ),
        (
            JournalCallError(grpc.StatusCode.FAILED_PRECONDITION, "x", "WORKFLOW_CLOSED"),
            LeaseLostError,
        ),
        (
            JournalCallError(grpc.StatusCode.FAILED_PRECONDITION, "x", "STEP_CONFLICT"),
            JournalUnavailableError,
        ),
    ],
    ids=["unavailable", "stale-fence", "closed", "conflict"],
)
async def test_journal_errors_become_interruptions_not_workflow_errors(
    error: JournalCallError, expected: type[BaseException]
) -> None:
    client = JournalClient(cast(Any, FailingSession(error)), "wf-1", 3)
    with pytest.raises(expected):
        await client.call(jpb.RecordStepRequest(workflow_id="wf-1", fence=3))
