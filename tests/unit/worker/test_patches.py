"""Patches in process: a kept run (sticky execution) that asked at the frontier and suspended
before recording anything sends the marker with its first record after the resume, once; a
patch id is checked before anything is asked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker import WorkflowContext, workflow
from perdure.worker._payload import from_payload
from perdure.worker._runner import _started
from perdure.worker._sticky import advance
from tests.unit.worker.fake_journal import FakeJournal, make_context
from tests.unit.worker.test_sticky_cache import FIRST, NEXT, STARTED, load, signal


@workflow
async def greeting(ctx: WorkflowContext) -> list[Any]:
    before = ctx.patched("greet")
    said = await ctx.wait_for_signal("message")
    return [said, before, ctx.patched("greet"), ctx.info.history_length]


async def test_a_kept_run_sends_its_marker_with_its_first_record_after_the_resume() -> None:
    first = FakeJournal(fence=FIRST)
    run = _started(greeting, load(first, STARTED), first, asyncio.Event(), lambda: 0.0, True)
    (outcome, _), keepable = await advance(run.code, run.pause)
    assert (outcome, keepable, first.recorded) == ("suspend", True, [])  # nothing to send yet
    later = FakeJournal(fence=NEXT)
    assert run.ctx.resume(load(later, signal(2, "hi")), later)
    run.pause.resume()

    (outcome, value), _ = await advance(run.code, run.pause)

    # The marker, then the consumption it came before, both under the new lease; asked again,
    # the same answer and no second marker. ctx.info counts both records (answered without
    # event ids here: one more each).
    assert (outcome, from_payload(value)) == ("result", ["hi", True, True, 3])
    sent = [(type(r).__name__, r.position, r.fence) for r in later.recorded]
    assert sent == [("RecordPatchRequest", 0, NEXT), ("ConsumeSignalsRequest", 0, NEXT)]
    assert isinstance(marker := later.recorded[0], jpb.RecordPatchRequest)
    assert marker.patch_id == "greet"


@pytest.mark.parametrize("patch_id", ["", "x" * 201, None])
async def test_a_patch_id_is_one_to_two_hundred_characters(patch_id: Any) -> None:
    ctx = make_context(FakeJournal(), [STARTED])
    with pytest.raises(ValueError, match="patch id"):
        ctx.patched(patch_id)
    with pytest.raises(ValueError, match="patch id"):
        ctx.deprecate_patch(patch_id)
