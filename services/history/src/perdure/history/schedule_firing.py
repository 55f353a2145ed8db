"""Fires schedules' due slots: every history replica runs this loop, and the row locks decide
which replica starts each slot (schedules.py)."""

from __future__ import annotations

from perdure.common.background import BackgroundLoop
from perdure.history.schedules import Schedules
from perdure.telemetry.propagation import untraced

# How late past its slot a run may start, at most (plus the start itself). The slot is judged
# by the database's clock at each look, never this host's.
POLL_SECONDS = 0.2


class ScheduleFiring(BackgroundLoop):
    """Looks for due slots five times a second and starts their runs; stopped, the slots wait
    for another replica, or for the catch-up window at the next start."""

    def __init__(self, journal: Schedules) -> None:
        super().__init__("schedule firing", self.fire, POLL_SECONDS)
        self._journal = journal

    async def fire(self) -> None:
        """Fire every due slot, a batch at a time."""
        with untraced():  # the poll runs all the time; each start is counted and logged
            await self._journal.fire_due_schedules()
