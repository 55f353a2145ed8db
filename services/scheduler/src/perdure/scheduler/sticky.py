"""Sticky offers: a run's next workflow task goes first to the worker that kept the run's state
(its Hello.sticky_id, its last TaskDone.sticky), and to any other once it has been due for the
sticky timeout. A reservation is only a preference: fencing keeps every grant safe."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from perdure.common import errors
from perdure.scheduler.locking import LOCKED, in_key_order

# How long a due task waits for the worker that keeps its run (PERDURE_STICKY_TIMEOUT).
DEFAULT_STICKY_TIMEOUT = 1.0
MAX_STICKY_ID = 100

# A worker that said goodbye keeps nothing: its runs' next tasks go to any worker at once.
FORGET_WORKER = f"""
WITH {in_key_order("FROM scheduler.tasks t WHERE t.sticky_id = %s")}
UPDATE scheduler.tasks t SET sticky_id = NULL, updated_at = now()
FROM locked WHERE {LOCKED}
"""


def sticky_id_of(value: str) -> str:
    """A Hello.sticky_id, checked: at most MAX_STICKY_ID printable characters."""
    if len(value) > MAX_STICKY_ID or not value.isprintable():
        raise errors.invalid_argument(
            f"hello.sticky_id must be at most {MAX_STICKY_ID} printable characters (a random "
            "id of the worker process, new at every start)"
        )
    return value


class StickyOffers:
    """Reservations of tasks for the worker that keeps their run."""

    _pool: AsyncConnectionPool

    async def forget_worker(self, sticky_id: str) -> None:
        """Drop every reservation for the worker `sticky_id` (it stopped, with its cache)."""
        async with self._pool.connection() as conn:
            await conn.execute(FORGET_WORKER, [sticky_id])
