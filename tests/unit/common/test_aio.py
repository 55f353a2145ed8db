"""wait_event: a background loop's wait that never loses a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from perdure.common.aio import wait_event


async def test_returns_when_the_event_is_set_or_the_time_is_up() -> None:
    event = asyncio.Event()
    await wait_event(event, 0.01)  # nobody sets it: returns after the time
    event.set()
    await asyncio.wait_for(wait_event(event, 60), 5)


async def test_a_cancellation_arriving_as_the_event_is_set_is_not_lost() -> None:
    # The race that made history and scheduler hang on SIGTERM: a loop is cancelled in the
    # same turn of the event loop as its wake-up event is set (asyncio.wait_for, before
    # Python 3.12, returns normally then, and the loop goes on forever).
    event = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await wait_event(event, 60)
            event.clear()
            rounds += 1

    for _ in range(50):
        task = asyncio.create_task(loop())
        await asyncio.sleep(0)  # the loop now waits on the event
        event.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
