"""SQL for the scheduler schema. Time is always the database's clock, never a process's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

# A task is a workflow's own (step_id '') or one of its remote steps' (step_id set, and
# workflow_type holding the step type). One statement for a whole batch. LEAST ignores NULL,
# so an earlier due time always wins and a request is never lost; the reason of the winning
# due time comes with it (SET sees the row as it was). A batch naming a task twice keeps its
# earliest request; rows are locked in key order, so concurrent batches cannot deadlock. The
# fence counter never falls below the floor history sends (the run's fence mark), so the next
# grant is always above the mark. A closed task stays closed: never due again.
ENQUEUE = """
INSERT INTO scheduler.tasks
    (workflow_id, step_id, workflow_type, task_queue, run_at, due_reason, trace_context, fence)
SELECT DISTINCT ON (workflow_id, step_id) workflow_id, step_id, workflow_type, task_queue,
       COALESCE(run_at, now()), due_reason, trace_context, fence_floor
FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[], %s::text[],
            %s::jsonb[], %s::bigint[])
     AS t(workflow_id, step_id, workflow_type, task_queue, run_at, due_reason, trace_context,
          fence_floor)
ORDER BY workflow_id, step_id, COALESCE(run_at, now())
ON CONFLICT (workflow_id, step_id) DO UPDATE
SET run_at = CASE WHEN scheduler.tasks.closed THEN NULL
                  ELSE LEAST(scheduler.tasks.run_at, EXCLUDED.run_at) END,
    due_reason = CASE
        WHEN scheduler.tasks.run_at IS NULL OR EXCLUDED.run_at < scheduler.tasks.run_at
        THEN EXCLUDED.due_reason ELSE scheduler.tasks.due_reason END,
    trace_context = COALESCE(EXCLUDED.trace_context, scheduler.tasks.trace_context),
    fence = GREATEST(scheduler.tasks.fence, EXCLUDED.fence),
    updated_at = now()
"""


# Every statement that changes several tasks first locks them in key order (workflow id, step
# id), as ENQUEUE inserts them: two such statements, or transactions made of them, then never
# wait on each other in a cycle (PostgreSQL would end one with a deadlock error, and with it a
# worker's stream and the TaskDones on their way). CLAIM skips locked rows and never waits.
def _in_key_order(rows: str) -> str:
    """A CTE `locked` of the task keys `rows` (a FROM ... WHERE ... over `scheduler.tasks t`)
    selects, locked in key order."""
    return f"""locked AS (
    SELECT t.workflow_id, t.step_id {rows}
    ORDER BY t.workflow_id, t.step_id
    FOR UPDATE OF t
)"""


LOCKED = "t.workflow_id = locked.workflow_id AND t.step_id = locked.step_id"

# Locks every task of these runs, in key order, for a transaction that changes several.
LOCK_RUNS = """
SELECT 1 FROM scheduler.tasks WHERE workflow_id = ANY(%s::text[])
ORDER BY workflow_id, step_id FOR UPDATE
"""

# Retires every task of closed runs (run_at NULL, never due again); a lease under way ends as
# it would have, and its release leaves the task as it is.
CLOSE = f"""
WITH {_in_key_order("FROM scheduler.tasks t WHERE t.workflow_id = ANY(%s::text[])")}
UPDATE scheduler.tasks t
SET closed = true, run_at = NULL, due_reason = NULL, updated_at = now()
FROM locked WHERE {LOCKED}
"""

# A task is grantable when it is due and unleased, or when its lease has expired: a worker
# that is paused or cut off keeps its connection, so only the deadline decides. A task woken by
# a timer is grantable `timer_lookahead` early, to a worker that waits out the rest itself.
# SKIP LOCKED lets scheduler replicas grant side by side without granting one task twice.
# Workflow tasks go to sessions declaring their workflow type, step tasks to those declaring
# their step type.
CLAIM = """
WITH due AS (
    SELECT workflow_id, step_id, lease_owner AS previous_owner,
           COALESCE(run_at, lease_expires_at) AS due_at, due_reason FROM scheduler.tasks
    WHERE task_queue = %(task_queue)s
      AND CASE WHEN step_id = '' THEN workflow_type = ANY(%(types)s)
               ELSE workflow_type = ANY(%(step_types)s) END
      AND NOT closed
      AND ((lease_owner IS NULL AND run_at <= now())
           OR (lease_owner IS NULL AND due_reason = 'timer'
               AND run_at <= now() + make_interval(secs => %(timer_lookahead)s))
           OR (lease_owner IS NOT NULL AND lease_expires_at <= now()))
    ORDER BY run_at NULLS FIRST
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE scheduler.tasks t
SET fence = t.fence + 1, lease_owner = %(session)s, lease_key = %(key)s, run_at = NULL,
    due_reason = NULL,
    updated_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl)s)
FROM due WHERE t.workflow_id = due.workflow_id AND t.step_id = due.step_id
RETURNING t.workflow_id, t.step_id, t.workflow_type, t.fence, due.previous_owner, due.due_at,
          EXTRACT(EPOCH FROM now() - due.due_at)::float8 AS late_by, due.due_reason,
          t.trace_context, t.lease_expires_at
"""


def _listed_leases(holder: str) -> str:
    """The listed leases (the columns `_lease_columns` makes) whose fence still matches and
    whose row `t` meets `holder`, locked in key order."""
    return _in_key_order(f"""
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

# Of the runs asked about, those whose own task is neither leased nor due (or has no row).
IDLE_RUNS = """
SELECT asked.workflow_id FROM unnest(%s::text[]) AS asked(workflow_id)
WHERE NOT EXISTS (
    SELECT 1 FROM scheduler.tasks t
    WHERE t.workflow_id = asked.workflow_id AND t.step_id = '' AND NOT t.closed
      AND (t.lease_owner IS NOT NULL OR t.run_at IS NOT NULL)
)
"""

HOLDS = """
SELECT 1 FROM scheduler.tasks
WHERE workflow_id = %s AND step_id = %s AND fence = %s AND lease_key = %s
  AND lease_owner IS NOT NULL AND lease_expires_at > now()
"""

# A finished task keeps its due time (history sets one when there is more to do); a task
# handed back unfinished is due again at once. Only the session holding the lease ends it:
# anyone else's TaskDone matches no row and changes nothing.
RELEASE = """
UPDATE scheduler.tasks
SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    run_at = CASE WHEN %(again)s AND NOT closed THEN now() ELSE run_at END
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND fence = %(fence)s
  AND lease_owner = %(session)s
RETURNING fence
"""

# The session's worker is gone mid-task: its work is due again at once.
RELEASE_SESSION = f"""
WITH {_in_key_order("FROM scheduler.tasks t WHERE t.lease_owner = %s")}
UPDATE scheduler.tasks t
SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    run_at = CASE WHEN closed THEN NULL ELSE now() END
FROM locked WHERE {LOCKED}
RETURNING t.workflow_id, t.step_id
"""

# Seconds until the next task of these queues becomes grantable (a due time, less the timer
# lookahead for a timer, or a lease expiry); negative when one is overdue, NULL when none is.
NEXT_DUE = """
SELECT EXTRACT(EPOCH FROM min(due) - now())::float8 FROM (
    SELECT min(CASE WHEN due_reason = 'timer'
                    THEN run_at - make_interval(secs => %(timer_lookahead)s)
                    ELSE run_at END) AS due
    FROM scheduler.tasks
    WHERE task_queue = ANY(%(queues)s) AND lease_owner IS NULL AND run_at IS NOT NULL
    UNION ALL
    SELECT min(lease_expires_at) FROM scheduler.tasks
    WHERE task_queue = ANY(%(queues)s) AND lease_owner IS NOT NULL
) AS next
"""

# Per known queue, the tasks due and unleased (the partial index on run_at serves it).
BACKLOG = """
SELECT q.task_queue, (
    SELECT count(*) FROM scheduler.tasks t
    WHERE t.task_queue = q.task_queue AND t.lease_owner IS NULL AND t.run_at <= now()
) FROM (SELECT DISTINCT task_queue FROM scheduler.workflow_types) q
"""

REGISTER_TYPE = """
INSERT INTO scheduler.workflow_types (task_queue, workflow_type) VALUES (%s, %s)
ON CONFLICT (task_queue, workflow_type) DO UPDATE SET last_seen_at = now()
"""

SELECT_TYPES = """
SELECT workflow_type FROM scheduler.workflow_types WHERE task_queue = %s ORDER BY workflow_type
"""


# A task to make due: workflow id, step id ('' for the workflow's own task), workflow or step
# type, task queue, due time (None: now), what a timed due time waits for (None: nothing), the
# workflow's trace context, the fence floor (history's fence mark).
Enqueued = tuple[str, str, str, str, datetime | None, str | None, Jsonb | None, int]
# A task's identity: its workflow id and step id ('' for the workflow's own task).
TaskKey = tuple[str, str]
# A lease a worker reports: its task and fence.
Lease = tuple[str, str, int]


def _lease_columns(leases: list[Lease]) -> dict[str, list[str] | list[int]]:
    """Leases as the columns an `unnest` of (ids, step_ids, fences) reads."""
    return {
        "ids": [w for w, _, _ in leases],
        "step_ids": [s for _, s, _ in leases],
        "fences": [f for _, _, f in leases],
    }


@dataclass(frozen=True)
class Grant:
    """A lease just granted."""

    workflow_id: str
    step_id: str  # '' for a workflow task
    task_type: str  # the workflow type, or a step task's step type
    fence: int
    previous_owner: str | None  # set when the lease expired and this grant takes over
    due_at: datetime
    late_by: float  # seconds from due to granted, on the database clock (< 0: granted ahead)
    due_reason: str | None  # timer, signal, retry: a timed wake-up firing
    trace_context: dict[str, str] | None
    lease_expires_at: datetime  # database clock


class TaskStore:
    """The scheduler's table operations, one transaction each."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def enqueue(self, tasks: list[Enqueued], closed: Sequence[str] = ()) -> None:
        """Make workflows due at their time (now when None), then retire every task of the
        `closed` runs, in one transaction."""
        async with self._pool.connection() as conn, conn.transaction():
            if tasks and closed:  # two statements: take all their locks in key order first
                runs = sorted({task[0] for task in tasks} | set(closed))
                await conn.execute(LOCK_RUNS, [runs])
            if tasks:
                columns = [list(column) for column in zip(*tasks, strict=True)]
                await conn.execute(ENQUEUE, columns)
            if closed:
                await conn.execute(CLOSE, [list(closed)])

    async def claim(
        self,
        session: str,
        task_queue: str,
        types: list[str],
        step_types: list[str],
        limit: int,
        ttl: float,
        timer_lookahead: float = 0.0,
        key: str = "",
    ) -> list[Grant]:
        """Lease up to `limit` grantable tasks of these workflow and step types to a session,
        each with a fresh fence (timer tasks up to `timer_lookahead` seconds before they are
        due). `key` is the API key the session authenticated with ("" without keys)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                CLAIM,
                {
                    "key": key,
                    "task_queue": task_queue,
                    "types": types,
                    "step_types": step_types,
                    "limit": limit,
                    "session": session,
                    "ttl": ttl,
                    "timer_lookahead": timer_lookahead,
                },
            )
            return [Grant(*row) for row in await cur.fetchall()]

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
            return {(str(w), str(s), int(f)) for w, s, f in await cur.fetchall()}

    async def renew_own(
        self, key: str, leases: list[Lease], ttl: float
    ) -> tuple[datetime, dict[Lease, datetime]]:
        """Extend the listed leases whose fence still matches and that a session of this API
        key holds; return the database clock's now and the new expiry of each lease renewed."""
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute("SELECT now()")
            row = await cur.fetchone()
            assert row is not None
            if not leases:
                return row[0], {}
            cur = await conn.execute(RENEW_OWN, {"key": key, "ttl": ttl, **_lease_columns(leases)})
            rows = await cur.fetchall()
        return row[0], {(str(w), str(s), int(f)): expires for w, s, f, expires in rows}

    async def idle_runs(self, workflow_ids: list[str]) -> list[str]:
        """Those of the runs whose own task is neither leased nor due."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(IDLE_RUNS, [workflow_ids])
            return [str(row[0]) for row in await cur.fetchall()]

    async def holds(self, lease: Lease, key: str) -> bool:
        """Whether a session of this API key holds this live lease."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(HOLDS, [*lease, key])
            return await cur.fetchone() is not None

    async def release(self, session: str, lease: Lease, again: bool = False) -> bool:
        """End a lease the session holds and is done with; `again`: its task is due again now
        (handed back unfinished). False, and nothing changed, when the session does not hold
        it (it expired and went elsewhere, or it never was the session's)."""
        workflow_id, step_id, fence = lease
        params = {
            "workflow_id": workflow_id,
            "step_id": step_id,
            "fence": fence,
            "again": again,
            "session": session,
        }
        async with self._pool.connection() as conn:
            cur = await conn.execute(RELEASE, params)
            return await cur.fetchone() is not None

    async def release_session(self, session: str) -> list[TaskKey]:
        """End every lease of a departed session and make its tasks due now."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(RELEASE_SESSION, [session])
            return [(str(w), str(s)) for w, s in await cur.fetchall()]

    async def next_due(self, queues: list[str], timer_lookahead: float = 0.0) -> float | None:
        """Seconds until the next task of `queues` is grantable (<= 0: overdue; None: none)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                NEXT_DUE, {"queues": queues, "timer_lookahead": timer_lookahead}
            )
            row = await cur.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def backlog(self) -> dict[str, int]:
        """Due, unleased tasks per known task queue."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(BACKLOG)
            return {str(queue): int(count) for queue, count in await cur.fetchall()}

    async def register_types(self, task_queue: str, types: list[str]) -> None:
        """Remember the workflow types a worker declared on a queue."""
        async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(REGISTER_TYPE, [(task_queue, t) for t in types])

    async def registered_types(self, task_queue: str) -> list[str]:
        """The workflow types ever declared on a queue."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(SELECT_TYPES, [task_queue])
            return [str(row[0]) for row in await cur.fetchall()]
