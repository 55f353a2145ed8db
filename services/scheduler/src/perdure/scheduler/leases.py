"""Leases held: renewed by their session or by their worker's key, adopted by a worker's new
session, checked, and released when the task is done or its session is gone."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.locking import LOCKED, in_key_order
from perdure.scheduler.model import Lease, OwnRenewal, TaskKey


def _lease_columns(leases: list[Lease]) -> dict[str, list[str] | list[int]]:
    """Leases as the columns an `unnest` of (ids, step_ids, fences) reads."""
    return {
        "ids": [lease.workflow_id for lease in leases],
        "step_ids": [lease.step_id for lease in leases],
        "fences": [lease.fence for lease in leases],
    }


def _listed_leases(holder: str) -> str:
    """The listed leases (the columns `_lease_columns` makes) whose fence still matches and
    whose row `t` meets `holder`, locked in key order."""
    return in_key_order(f"""
    FROM scheduler.tasks t
    JOIN unnest(%(ids)s::text[], %(step_ids)s::text[], %(fences)s::bigint[])
         AS held(workflow_id, step_id, fence)
      ON t.workflow_id = held.workflow_id AND t.step_id = held.step_id AND t.fence = held.fence
    WHERE {holder}""")


def _renew(holder: str) -> str:
    """Extend the listed leases whose fence still matches and that `holder` (a condition on
    the row `t`) allows this session to hold; the session holds them from then on."""
    return f"""
WITH {_listed_leases(holder)}
UPDATE scheduler.tasks t
SET lease_owner = %(session)s, lease_expires_at = now() + make_interval(secs => %(ttl)s)
FROM locked WHERE {LOCKED}
RETURNING t.workflow_id, t.step_id, t.fence
"""


# A heartbeat renews the session's own leases, nothing else.
RENEW = _renew("t.lease_owner = %(session)s")
# A hello takes over the leases its worker held in an earlier session (after a reconnect, or
# when a replica moved it): only those granted to a session of the same API key on the same
# task queue, so no session ever takes a lease its key and queue could not have been granted.
ADOPT = _renew(
    "t.lease_owner IS NOT NULL AND t.lease_key = %(key)s AND t.task_queue = %(task_queue)s"
)

# A worker renews its leases from a thread of its own, whatever its stream is doing: any live
# or broken session of its API key may hold them (a broken stream's leases stand until they
# expire or a hello takes them over). The owner stays as it is: only a hello moves a lease. The
# expiry and now() are the database clock's, for the worker to fence itself by.
RENEW_OWN = f"""
WITH {_listed_leases("t.lease_owner IS NOT NULL AND t.lease_key = %(key)s")}
UPDATE scheduler.tasks t
SET lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
FROM locked WHERE {LOCKED}
RETURNING t.workflow_id, t.step_id, t.fence, t.lease_expires_at
"""

HOLDS = """
SELECT 1 FROM scheduler.tasks
WHERE workflow_id = %s AND step_id = %s AND fence = %s AND lease_key = %s
  AND lease_owner IS NOT NULL AND lease_expires_at > now()
"""

# A finished task keeps its due time (history sets one when there is more to do); a task
# handed back unfinished is due again at once. Only the session holding the lease ends it:
# anyone else's TaskDone matches no row and changes nothing. `sticky_id`: the worker that
# keeps the run's state, whom its next task is offered to first (NULL: any worker).
RELEASE = """
UPDATE scheduler.tasks
SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    run_at = CASE WHEN %(again)s AND NOT closed THEN now() ELSE run_at END,
    sticky_id = %(sticky_id)s
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND fence = %(fence)s
  AND lease_owner = %(session)s
RETURNING fence
"""

# The session's worker is gone mid-task: its work is due again at once.
RELEASE_SESSION = f"""
WITH {in_key_order("FROM scheduler.tasks t WHERE t.lease_owner = %s")}
UPDATE scheduler.tasks t
SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    run_at = CASE WHEN closed THEN NULL ELSE now() END
FROM locked WHERE {LOCKED}
RETURNING t.workflow_id, t.step_id
"""


class Leases:
    """Renewing, adopting, checking and releasing leases."""

    _pool: AsyncConnectionPool

    async def renew(self, session: str, leases: list[Lease], ttl: float) -> set[Lease]:
        """Extend the session's own leases whose fence still matches; return those renewed."""
        return await self._renew(RENEW, session, leases, ttl)

    async def adopt(
        self, session: str, leases: list[Lease], ttl: float, key: str, task_queue: str
    ) -> set[Lease]:
        """Move to a new session, and extend, the leases its worker held in an earlier one:
        those whose fence still matches, granted to a session of the same API key (`key`, ""
        without keys) on the same task queue; return those adopted."""
        return await self._renew(ADOPT, session, leases, ttl, key=key, task_queue=task_queue)

    async def _renew(
        self, query: str, session: str, leases: list[Lease], ttl: float, **params: str
    ) -> set[Lease]:
        if not leases:
            return set()
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                query,
                {**params, "session": session, "ttl": ttl, **_lease_columns(leases)},
            )
            return {Lease(str(w), str(s), int(f)) for w, s, f in await cur.fetchall()}

    async def renew_own(self, key: str, leases: list[Lease], ttl: float) -> OwnRenewal:
        """Extend the listed leases whose fence still matches and that a session of this API
        key holds; return the database clock's now and the new expiry of each lease renewed."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute("SELECT now()")
            row = await cur.fetchone()
            assert row is not None
            if not leases:
                return OwnRenewal(row[0], {})
            cur = await conn.execute(RENEW_OWN, {"key": key, "ttl": ttl, **_lease_columns(leases)})
            rows = await cur.fetchall()
        return OwnRenewal(
            row[0], {Lease(str(w), str(s), int(f)): expires for w, s, f, expires in rows}
        )

    async def holds(self, lease: Lease, key: str) -> bool:
        """Whether a session of this API key holds this live lease."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(HOLDS, [*lease, key])
            return await cur.fetchone() is not None

    async def release(
        self, session: str, lease: Lease, again: bool = False, sticky_id: str | None = None
    ) -> bool:
        """End a lease the session holds and is done with; `again`: its task is due again now
        (handed back unfinished); `sticky_id`: the worker that keeps the run's state, offered
        its next task first. False, and nothing changed, when the session does not hold it
        (it expired and went elsewhere, or it never was the session's)."""
        params = {**lease._asdict(), "again": again, "session": session, "sticky_id": sticky_id}
        async with self._pool.connection() as conn:
            cur = await conn.execute(RELEASE, params)
            return await cur.fetchone() is not None

    async def release_session(self, session: str) -> list[TaskKey]:
        """End every lease of a departed session and make its tasks due now."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(RELEASE_SESSION, [session])
            return [TaskKey(str(w), str(s)) for w, s in await cur.fetchall()]
