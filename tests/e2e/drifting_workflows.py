"""Workflows run by a worker that drifts from its journal and from the database: its wall clock
is an hour ahead (as a worker host's can be), and one workflow's code changes on its
cancellation path between two replays (read from a file, as if redeployed)."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from perdure.worker import WorkflowCancelledError, WorkflowContext, _context, workflow

CLOCK_AHEAD = timedelta(hours=1)


class _AheadClock(datetime):
    """This worker's wall clock: an hour ahead of the database's."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> _AheadClock:
        ahead = datetime.now(tz) + CLOCK_AHEAD
        return cls.fromtimestamp(ahead.timestamp(), tz)


_context.datetime = _AheadClock  # type: ignore[attr-defined]  # the SDK's wall clock, here


@workflow
async def clock_reading(ctx: WorkflowContext) -> str:
    """What ctx.now() says, on a worker whose own clock is an hour ahead."""
    return (await ctx.now()).isoformat()


@workflow
async def cancel_path_switch(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Waits for "go"; cancelled, it compensates with "release" and waits for "finish", unless
    the version file says "plain": then it re-raises at once (changed code)."""
    try:
        await ctx.wait_for_signal("go")
    except WorkflowCancelledError:
        version = Path(params["version_file"]).read_text().strip()  # noqa: ASYNC240 (tiny)
        if version != "plain":
            await ctx.step("release", lambda: "released")
            await ctx.wait_for_signal("finish")
        raise
    return "done"
