"""The SDK's replay engine: WorkflowContext against hand-built journals and an in-memory journal."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from perdure.api.common.v1.payload_pb2 import Payload, PayloadRef
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker import NonDeterminismError, StepContext, StepFailedError, current_step
from perdure.worker._context import WorkflowContext
from perdure.worker._payload import to_payload
from perdure.worker._retry import NO_RETRY
from tests.unit.worker.fake_journal import FakeJournal, make_context

WORKFLOW_ID = "order-17"
FENCE = 4


class Calls:
    """A step function that counts its calls and returns a fixed value."""

    def __init__(self, result: Any = None) -> None:
        self.result = result
        self.count = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.result


def started_event() -> wf.HistoryEvent:
    # Position 0 by default, like every non-step event: it must not shadow step 0.
    return wf.HistoryEvent(
        event_id=1, event_type=wf.EVENT_TYPE_WORKFLOW_STARTED, payload=to_payload({"n": 1})
    )


def step_event(
    event_type: wf.EventType, event_id: int, position: int, step_id: str, **outcome: Any
) -> wf.HistoryEvent:
    return wf.HistoryEvent(
        event_id=event_id,
        event_type=event_type,
        fence=1,
        step_id=step_id,
        step_name=step_id.partition("#")[0],
        position=position,
        attempt=1,
        **outcome,
    )


def completed(event_id: int, position: int, step_id: str, output: Any) -> wf.HistoryEvent:
    return step_event(
        wf.EVENT_TYPE_STEP_COMPLETED, event_id, position, step_id, payload=to_payload(output)
    )


def completed_by_reference(
    event_id: int, position: int, step_id: str, digest: bytes
) -> wf.HistoryEvent:
    ref = PayloadRef(sha256=digest, encoding="json/plain")
    return step_event(wf.EVENT_TYPE_STEP_COMPLETED, event_id, position, step_id, payload_ref=ref)


def failed(event_id: int, position: int, step_id: str, failure: wf.Failure) -> wf.HistoryEvent:
    return step_event(wf.EVENT_TYPE_STEP_FAILED, event_id, position, step_id, failure=failure)


def context(
    events: list[wf.HistoryEvent] | None = None, journal: FakeJournal | None = None
) -> tuple[WorkflowContext, FakeJournal]:
    journal = journal or FakeJournal(WORKFLOW_ID, FENCE)
    ctx = make_context(journal, [started_event(), *(events or [])], workflow_type="checkout")
    return ctx, journal


def step_ids(journal: FakeJournal) -> list[tuple[str, str, int]]:
    return [(r.step_id, r.step_name, r.position) for r in journal.steps()]


def never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a recorded step must not run again")


# --- replay of completed steps -------------------------------------------------------------------


async def test_completed_steps_come_from_the_journal_without_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx, journal = context(
        [completed(2, 0, "reserve", {"sku": "A", "qty": 2}), completed(3, 1, "charge", "tx-9")]
    )
    caplog.set_level(logging.INFO, logger="perdure.worker")

    assert await ctx.step("reserve", never, "A") == {"sku": "A", "qty": 2}
    assert await ctx.step("charge", never) == "tx-9"

    assert journal.recorded == []
    skipped = [r.getMessage() for r in caplog.records if r.name == "perdure.worker"]
    assert skipped == ["Skipping completed step: reserve", "Skipping completed step: charge"]


async def test_a_recorded_output_held_by_reference_is_fetched_only_when_reached() -> None:
    first, second = b"a" * 32, b"b" * 32
    journal = FakeJournal(WORKFLOW_ID, FENCE)
    journal.payloads = {first: to_payload("large a"), second: to_payload("large b")}
    ctx, _ = context(
        [
            completed_by_reference(2, 0, "first", first),
            completed_by_reference(3, 1, "second", second),
        ],
        journal,
    )

    assert await ctx.step("first", never) == "large a"
    assert [r.sha256 for r in journal.recorded] == [first]  # the second is not fetched yet
    assert await ctx.step("second", never) == "large b"
    assert [(r.workflow_id, r.fence, r.sha256) for r in journal.recorded] == [
        (WORKFLOW_ID, FENCE, first),
        (WORKFLOW_ID, FENCE, second),
    ]


async def test_replay_logs_the_occurrence_step_id(caplog: pytest.LogCaptureFixture) -> None:
    ctx, _ = context([completed(2, 0, "model", 1), completed(3, 1, "model#2", 2)])
    caplog.set_level(logging.INFO, logger="perdure.worker")
    assert [await ctx.step("model", never), await ctx.step("model", never)] == [1, 2]
    assert "Skipping completed step: model#2" in caplog.messages


async def test_new_step_after_replayed_ones_runs_and_is_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx, journal = context([completed(2, 0, "reserve", True), completed(3, 1, "charge", "tx-9")])
    caplog.set_level(logging.INFO, logger="perdure.worker")
    ship = Calls({"tracking": "Z1", "parcels": [1, 2]})

    await ctx.step("reserve", never)
    await ctx.step("charge", never)
    result = await ctx.step("ship", ship, "addr", express=True)

    assert result == {"tracking": "Z1", "parcels": [1, 2]}
    assert ship.count == 1
    [request] = journal.recorded
    assert request.workflow_id == WORKFLOW_ID
    assert request.fence == FENCE
    assert (request.step_id, request.step_name, request.position) == ("ship", "ship", 2)
    assert request.attempt == 1
    assert request.WhichOneof("outcome") == "output"
    assert request.output == to_payload({"tracking": "Z1", "parcels": [1, 2]})
    assert "Skipping completed step: ship" not in caplog.messages


async def test_step_arguments_are_passed_through() -> None:
    ctx, _ = context()
    seen: list[Any] = []

    def add(a: int, b: int, *, scale: int) -> int:
        seen.append((a, b, scale))
        return (a + b) * scale

    assert await ctx.step("add", add, 2, 3, scale=10) == 50
    assert seen == [(2, 3, 10)]


async def test_a_step_returning_none_records_json_null() -> None:
    ctx, journal = context()
    assert await ctx.step("noop", Calls(None)) is None
    [request] = journal.recorded
    assert request.WhichOneof("outcome") == "output"
    assert request.output == Payload(encoding="json/plain", data=b"null")


# --- step ids ------------------------------------------------------------------------------------


async def test_repeated_names_get_occurrence_numbers() -> None:
    ctx, journal = context()
    for name in ["model", "model", "tool", "model"]:
        await ctx.step(name, Calls(name))

    assert step_ids(journal) == [
        ("model", "model", 0),
        ("model#2", "model", 1),
        ("tool", "tool", 2),
        ("model#3", "model", 3),
    ]


async def test_occurrence_numbering_continues_past_replayed_steps() -> None:
    ctx, journal = context([completed(2, 0, "model", "a"), completed(3, 1, "model#2", "b")])
    results = [await ctx.step("model", Calls("new")) for _ in range(3)]

    assert results == ["a", "b", "new"]
    assert step_ids(journal) == [("model#3", "model", 2)]


@pytest.mark.parametrize("bad", ["", "$now", "$custom"])
async def test_step_names_must_be_non_empty_and_not_internal(bad: str) -> None:
    ctx, journal = context()
    calls = Calls(1)
    with pytest.raises(ValueError, match="step name"):
        await ctx.step(bad, calls)
    assert calls.count == 0
    assert journal.recorded == []


# --- failures ------------------------------------------------------------------------------------


async def test_a_recorded_failure_is_raised_again_on_replay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failure = wf.Failure(type="CardDeclined", message="insufficient funds", stack_trace="tb")
    ctx, journal = context([completed(2, 0, "reserve", 1), failed(3, 1, "charge", failure)])
    caplog.set_level(logging.INFO, logger="perdure.worker")

    await ctx.step("reserve", never)
    with pytest.raises(StepFailedError) as caught:
        await ctx.step("charge", never)

    error = caught.value
    assert error.step_id == "charge"
    assert error.error_type == "CardDeclined"
    assert error.message == "insufficient funds"
    assert error.failure == failure
    assert "CardDeclined: insufficient funds" in str(error)
    assert journal.recorded == []
    assert "Skipping completed step: charge" in caplog.messages


async def test_a_step_failing_without_retries_is_recorded_as_failed() -> None:
    ctx, journal = context()

    def charge() -> None:
        raise RuntimeError("gateway timeout")

    with pytest.raises(StepFailedError) as caught:
        await ctx.step("charge", charge, retry=NO_RETRY)

    assert caught.value.error_type == "RuntimeError"
    assert caught.value.message == "gateway timeout"
    assert isinstance(caught.value.__cause__, RuntimeError)
    [request] = journal.recorded
    assert (request.step_id, request.position) == ("charge", 0)
    assert request.WhichOneof("outcome") == "failure"
    assert request.failure.type == "RuntimeError"
    assert request.failure.message == "gateway timeout"
    assert "gateway timeout" in request.failure.stack_trace


async def test_the_failure_replays_as_the_same_error() -> None:
    first, journal = context()
    with pytest.raises(StepFailedError) as original:
        await first.step("charge", Calls(object()), retry=NO_RETRY)
    [request] = journal.recorded

    replay, _ = context([failed(2, 0, "charge", request.failure)])
    with pytest.raises(StepFailedError) as replayed:
        await replay.step("charge", never)
    assert str(replayed.value) == str(original.value)
    assert replayed.value.error_type == original.value.error_type


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1, 2},
        {"raw": b"bytes inside JSON"},
        {"when": datetime(2024, 1, 1, tzinfo=UTC)},
        {1: "non-string key"},
        pytest.param(float("nan"), id="nan"),
        pytest.param({"score": float("inf")}, id="nested-inf"),
    ],
)
async def test_a_non_json_return_value_becomes_a_recorded_failure(value: Any) -> None:
    ctx, journal = context()
    with pytest.raises(StepFailedError) as caught:
        await ctx.step("compute", Calls(value))

    assert caught.value.error_type == "TypeError"
    assert "is not encodable" in caught.value.message
    [request] = journal.recorded
    assert request.WhichOneof("outcome") == "failure"
    assert request.failure.type == "TypeError"
    assert request.step_id == "compute"


async def test_the_position_advances_past_a_failed_step() -> None:
    ctx, journal = context()
    with pytest.raises(StepFailedError):
        await ctx.step("flaky", Calls(object()))
    await ctx.step("fallback", Calls("ok"))
    assert step_ids(journal) == [("flaky", "flaky", 0), ("fallback", "fallback", 1)]


# --- non-determinism -----------------------------------------------------------------------------


async def test_a_different_step_at_a_recorded_position_is_non_determinism() -> None:
    ctx, journal = context([completed(2, 0, "reserve", 1), completed(3, 1, "charge", "tx")])
    await ctx.step("reserve", never)
    calls = Calls("refund")

    with pytest.raises(NonDeterminismError) as caught:
        await ctx.step("refund", calls)

    message = str(caught.value)
    assert WORKFLOW_ID in message
    assert "'refund'" in message and "'charge'" in message
    assert calls.count == 0
    assert journal.recorded == []


async def test_an_extra_occurrence_at_a_recorded_position_is_non_determinism() -> None:
    ctx, _ = context([completed(2, 0, "model", 1), completed(3, 1, "tool", 2)])
    await ctx.step("model", never)
    with pytest.raises(NonDeterminismError, match="model#2"):
        await ctx.step("model", never)


async def test_non_determinism_escapes_except_exception() -> None:
    ctx, _ = context([completed(2, 0, "a", 1)])
    with pytest.raises(NonDeterminismError):
        try:
            await ctx.step("b", never)
        except Exception:  # what careless workflow code does
            pytest.fail("NonDeterminismError must not be an Exception")


# --- how steps run -------------------------------------------------------------------------------


async def test_a_sync_step_runs_in_a_thread_while_the_loop_goes_on() -> None:
    ctx, _ = context()
    loop_thread = threading.get_ident()
    released = threading.Event()

    def blocking() -> int:
        # Only a task on the event loop sets the event: this returns True only if the loop
        # keeps running while the step blocks.
        assert released.wait(timeout=5)
        return threading.get_ident()

    async def release_soon() -> None:
        await asyncio.sleep(0)
        released.set()

    helper = asyncio.create_task(release_soon())
    step_thread = await ctx.step("blocking", blocking)
    await helper
    assert step_thread != loop_thread


async def test_an_async_step_is_awaited_on_the_loop() -> None:
    ctx, journal = context()
    loop_thread = threading.get_ident()

    async def fetch(n: int) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": n, "thread_is_loop": int(threading.get_ident() == loop_thread)}

    assert await ctx.step("fetch", fetch, 7) == {"n": 7, "thread_is_loop": 1}
    assert journal.recorded[0].output == to_payload({"n": 7, "thread_is_loop": 1})


async def test_a_sync_function_returning_an_awaitable_is_awaited() -> None:
    ctx, _ = context()

    async def later() -> str:
        return "done"

    assert await ctx.step("indirect", lambda: later()) == "done"


# --- current_step() ------------------------------------------------------------------------------


def test_current_step_outside_a_step_raises() -> None:
    with pytest.raises(RuntimeError, match="only available inside a running step"):
        current_step()


async def test_current_step_inside_a_sync_and_an_async_step() -> None:
    ctx, _ = context([completed(2, 0, "charge", "x")])
    seen: list[StepContext] = []

    def sync_step() -> str:
        seen.append(current_step())
        return "ok"

    async def async_step() -> str:
        seen.append(current_step())
        return "ok"

    await ctx.step("charge", never)
    await ctx.step("charge", sync_step)
    await ctx.step("notify", async_step)

    assert seen == [
        StepContext(
            workflow_id=WORKFLOW_ID,
            step_id="charge#2",
            idempotency_key=f"{WORKFLOW_ID}:charge#2",
            fence=FENCE,
            attempt=1,
        ),
        StepContext(
            workflow_id=WORKFLOW_ID,
            step_id="notify",
            idempotency_key=f"{WORKFLOW_ID}:notify",
            fence=FENCE,
            attempt=1,
        ),
    ]
    with pytest.raises(RuntimeError):
        current_step()  # reset after the step, in the workflow's own context


async def test_current_step_is_reset_after_a_failing_step() -> None:
    ctx, _ = context()

    def boom() -> None:
        assert current_step().step_id == "boom"
        raise ValueError("x")

    with pytest.raises(StepFailedError, match="ValueError"):
        await ctx.step("boom", boom, retry=NO_RETRY)
    with pytest.raises(RuntimeError):
        current_step()


# --- JSON form of results ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ((1, 2, 3), [1, 2, 3]),
        (3.0, 3.0),
        (3, 3),
        (2**64 + 1, 2**64 + 1),
        (b"\x00\xff", b"\x00\xff"),
        (2.5, 2.5),
        ({"pair": ("a", 1.0), "nested": [{"x": 4}]}, {"pair": ["a", 1.0], "nested": [{"x": 4}]}),
        ("text", "text"),
        (True, True),
        ([], []),
    ],
)
async def test_new_and_replayed_results_are_the_same_json(returned: Any, expected: Any) -> None:
    first, journal = context()
    fresh = await first.step("compute", Calls(returned))
    assert fresh == expected
    assert type(fresh) is type(expected)

    [request] = journal.recorded
    event = completed(2, 0, "compute", None)
    event.payload.CopyFrom(request.output)  # replay exactly what was recorded
    replay, _ = context([event])
    replayed = await replay.step("compute", never)
    assert replayed == expected
    assert type(replayed) is type(expected)


async def test_three_comes_back_as_an_int_on_replay() -> None:
    ctx, _ = context([completed(2, 0, "count", 3)])
    value = await ctx.step("count", never)
    assert value == 3
    assert isinstance(value, int)


# --- unconsumed steps ----------------------------------------------------------------------------


async def test_unconsumed_steps_lists_recorded_steps_not_reached_in_order() -> None:
    ctx, _ = context(
        [
            completed(4, 2, "c", 3),
            completed(2, 0, "a", 1),
            failed(3, 1, "b", wf.Failure(type="E", message="m")),
        ]
    )
    assert ctx.unconsumed_steps() == ["a", "b", "c"]
    await ctx.step("a", never)
    assert ctx.unconsumed_steps() == ["b", "c"]
    with pytest.raises(StepFailedError):
        await ctx.step("b", never)
    assert ctx.unconsumed_steps() == ["c"]
    await ctx.step("c", never)
    assert ctx.unconsumed_steps() == []


async def test_unconsumed_steps_ignores_non_step_events() -> None:
    finished = wf.HistoryEvent(
        event_id=3, event_type=wf.EVENT_TYPE_WORKFLOW_COMPLETED, payload=to_payload("r")
    )
    ctx, _ = context([completed(2, 0, "only", 1), finished])
    assert ctx.unconsumed_steps() == ["only"]
    assert await ctx.step("only", never) == 1
    assert ctx.unconsumed_steps() == []


async def test_a_fresh_run_has_nothing_unconsumed() -> None:
    ctx, _ = context()
    assert ctx.unconsumed_steps() == []
    await ctx.step("a", Calls(1))
    assert ctx.unconsumed_steps() == []


# --- recorded values of now() and uuid4() --------------------------------------------------------


async def test_now_and_uuid_are_recorded_once_and_replayed_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, journal = context()
    moment = await first.now()
    ident = await first.uuid4()
    assert moment.tzinfo is not None
    assert [(r.step_id, r.position) for r in journal.recorded] == [("$now", 0), ("$uuid", 1)]

    events = [completed(2 + i, r.position, r.step_id, None) for i, r in enumerate(journal.recorded)]
    for event, request in zip(events, journal.recorded, strict=True):
        event.payload.CopyFrom(request.output)
    replay, replay_journal = context(events)
    caplog.set_level(logging.INFO, logger="perdure.worker")

    assert await replay.now() == moment
    assert await replay.uuid4() == ident
    assert replay_journal.recorded == []
    assert not [m for m in caplog.messages if "Skipping" in m]
