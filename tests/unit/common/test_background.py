"""BackgroundLoop: rounds at an interval or when woken, failures logged and survived, a stop
that always ends it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from perdure.common.background import BackgroundLoop


async def test_a_woken_loop_runs_a_round_at_once() -> None:
    ran = asyncio.Event()
    wake = asyncio.Event()

    async def work() -> None:
        ran.set()

    loop = BackgroundLoop("woken", work, 60, wake=wake)
    loop.start()
    wake.set()
    await asyncio.wait_for(ran.wait(), 5)  # not after the 60 s interval
    await loop.stop()


async def test_failed_rounds_are_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds = 0
    third = asyncio.Event()

    async def work() -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 3:
            third.set()
        raise OSError("peer away") if rounds == 1 else ValueError("bug")

    loop = BackgroundLoop("flaky", work, 0.001, transient=(OSError,))
    with caplog.at_level(logging.WARNING, logger="perdure.common.background"):
        loop.start()
        await asyncio.wait_for(third.wait(), 5)
        await loop.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "flaky failed, will retry: peer away" in warnings[0].getMessage()
    assert errors and errors[0].exc_info is not None  # an unexpected error keeps its trace


async def test_stop_ends_a_round_under_way_and_a_loop_never_started() -> None:
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.sleep(3600)

    await BackgroundLoop("idle", work, 1).stop()
    loop = BackgroundLoop("busy", work, 0.001)
    loop.start()
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.wait_for(loop.stop(), 5)
