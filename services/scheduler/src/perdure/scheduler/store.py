"""The scheduler's store: every statement on the scheduler schema, one part per concept (due
tasks in due.py, lease grants in grants.py, leases held in leases.py, task queues in queues.py;
the key-order locking they share in locking.py)."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.due import Due, Enqueued
from perdure.scheduler.grants import Grant, Grants
from perdure.scheduler.leases import Lease, Leases, TaskKey
from perdure.scheduler.queues import Queues

__all__ = ["Enqueued", "Grant", "Lease", "TaskKey", "TaskStore"]


class TaskStore(Due, Grants, Leases, Queues):
    """The scheduler's table operations, one transaction each."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
