"""asyncio helpers the services' background loops share."""

from __future__ import annotations

import asyncio
import contextlib


async def wait_event(event: asyncio.Event, seconds: float) -> None:
    """Wait until `event` is set or `seconds` have passed, whichever comes first.

    Not `asyncio.wait_for`: before Python 3.12 it swallows a cancellation that arrives as the
    event is set, and a loop cancelled that way never stops (a service would hang on SIGTERM).
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
