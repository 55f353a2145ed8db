"""The scheduler's store: every statement on the scheduler schema, one part per concept (due
tasks in due.py, lease grants in grants.py, leases held in leases.py, task queues in queues.py,
sticky offers in sticky.py, builds and routing policies in builds.py, pauses in pauses.py,
flow control in flow/;
the key-order locking they share in locking.py; the records they take and give in model.py)."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.builds import Builds
from perdure.scheduler.due import Due
from perdure.scheduler.flow.budgets import Budgets
from perdure.scheduler.flow.claim import FlowGrants
from perdure.scheduler.flow.limits import FlowLimits
from perdure.scheduler.grants import Grants
from perdure.scheduler.leases import Leases
from perdure.scheduler.pauses import Pauses
from perdure.scheduler.queues import Queues
from perdure.scheduler.sticky import StickyOffers


class TaskStore(
    Due, Grants, FlowGrants, FlowLimits, Budgets, Leases, Queues, StickyOffers, Builds, Pauses
):
    """The scheduler's table operations, one transaction each."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def flow_queues(self) -> set[str]:
        """The task queues that have had tasks with flow settings (the flow claim's)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT DISTINCT task_queue FROM scheduler.fairness")
            return {str(row[0]) for row in await cur.fetchall()}
