"""Lease grants: which due tasks a session is granted, each with a fresh fence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.builds import routed
from perdure.scheduler.due import grantable_at
from perdure.scheduler.model import Build, DueReason, Grant
from perdure.scheduler.pauses import not_paused

# A task is grantable when it is due and unleased, or when its lease has expired: a worker
# that is paused or cut off keeps its connection, so only the deadline decides. A task woken by
# a timer is grantable `timer_lookahead` early, to a worker that waits out the rest itself.
# SKIP LOCKED lets scheduler replicas grant side by side without granting one task twice.
# Workflow tasks go to sessions declaring their workflow type, step tasks to those declaring
# their step type. A task whose run another worker keeps (sticky_id) waits the sticky timeout
# for that worker first (sticky.py); a grant ends the reservation, and the holder's TaskDone
# makes the next one. A workflow task goes only to a session its type's routing policy allows
# (builds.py), and its first grant records the session's build as the run's.
FOR_SESSION = f"""task_queue = %(task_queue)s
      AND CASE WHEN step_id = '' THEN workflow_type = ANY(%(types)s)
               ELSE workflow_type = ANY(%(step_types)s) END
      AND NOT closed
      AND {routed()}
      AND {not_paused()}"""
DUE_COLUMNS = """workflow_id, step_id, lease_owner AS previous_owner,
           COALESCE(run_at, lease_expires_at) AS due_at, due_reason, sticky_id"""
# Grants the tasks of a CTE `due` (of DUE_COLUMNS, locked by the statement or transaction),
# each with a fresh fence: the one spelling of a grant, for the plain claim and the flow claim.
GRANT_DUE = """
UPDATE scheduler.tasks t
SET fence = t.fence + 1, lease_owner = %(session)s, lease_key = %(key)s, run_at = NULL,
    due_reason = NULL, sticky_id = NULL,
    build_id = CASE WHEN t.step_id = '' THEN COALESCE(t.build_id, %(build)s) END,
    updated_at = now(), lease_expires_at = now() + make_interval(secs => %(ttl)s)
FROM due WHERE t.workflow_id = due.workflow_id AND t.step_id = due.step_id
RETURNING t.workflow_id, t.step_id, t.workflow_type, t.fence, due.previous_owner, due.due_at,
          EXTRACT(EPOCH FROM now() - due.due_at)::float8 AS late_by, due.due_reason,
          t.trace_context, t.lease_expires_at, due.sticky_id
"""
# The plain claim, for queues with no flow settings (flow/ claims the others): expired leases
# first, then unleased tasks by due time: two scans, each in its index's order and stopped at
# the limit (one scan of both conditions read and sorted every due task at every claim, and
# 10,000 timers due at once made each claim cost milliseconds). Rows the second scan locks
# beyond the limit are left as they are. The first bound on run_at is implied by the second,
# for the index. A task with flow settings is never granted here, whatever a replica believes
# of its queue: only the flow claim weighs its limits.
CLAIM = f"""
WITH expired AS (
    SELECT {DUE_COLUMNS}, 0 AS rank FROM scheduler.tasks
    WHERE lease_owner IS NOT NULL AND lease_expires_at <= now() AND flow IS NULL
      AND {FOR_SESSION}
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), unleased AS (
    SELECT {DUE_COLUMNS}, 1 AS rank FROM scheduler.tasks
    WHERE lease_owner IS NULL AND run_at IS NOT NULL AND flow IS NULL
      AND run_at <= now() + make_interval(secs => %(timer_lookahead)s)
      AND {grantable_at("%(sticky_ids)s::text[]")} <= now()
      AND {FOR_SESSION}
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT * FROM expired UNION ALL SELECT * FROM unleased
    ORDER BY rank, due_at
    LIMIT %(limit)s
){GRANT_DUE}"""


@dataclass(frozen=True)
class ClaimFor:
    """Who a claim grants to, and what it may take."""

    session: str
    task_queue: str
    types: list[str]
    step_types: list[str]
    limit: int
    ttl: float
    timer_lookahead: float = 0.0
    key: str = ""  # the API key the session authenticated with ("" without keys)
    sticky_id: str = ""  # its worker's cache ("" : none)
    sticky_timeout: float = 0.0
    build: Build = field(default_factory=Build)

    def params(self) -> dict[str, Any]:
        """The parameters FOR_SESSION, DUE_COLUMNS and GRANT_DUE read."""
        return {
            "key": self.key,
            "task_queue": self.task_queue,
            "types": self.types,
            "step_types": self.step_types,
            "limit": self.limit,
            "session": self.session,
            "ttl": self.ttl,
            "timer_lookahead": self.timer_lookahead,
            "sticky_ids": [self.sticky_id] if self.sticky_id else [],
            "sticky_timeout": self.sticky_timeout,
            "build": self.build.build_id,
            "namespace": self.build.namespace,
            "newest": self.build.newest_types,
        }


class Grants:
    """Granting due tasks to a session."""

    _pool: AsyncConnectionPool

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
        sticky_id: str = "",
        sticky_timeout: float = 0.0,
        build: Build | None = None,
    ) -> list[Grant]:
        """Lease up to `limit` grantable tasks of these workflow and step types to a session,
        each with a fresh fence (timer tasks up to `timer_lookahead` seconds before they are
        due), tasks with flow settings excepted (flow/claim.py grants those). `key` is the API
        key the session authenticated with ("" without keys). Tasks whose run another worker
        keeps come only once due for `sticky_timeout` seconds; those its own worker
        (`sticky_id`) keeps, at once. Workflow tasks are routed by `build`."""
        claim = ClaimFor(
            session,
            task_queue,
            types,
            step_types,
            limit,
            ttl,
            timer_lookahead,
            key,
            sticky_id,
            sticky_timeout,
            build or Build(),
        )
        return await self.claim_plain(claim)

    async def claim_plain(self, claim: ClaimFor) -> list[Grant]:
        """As `claim`."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(CLAIM, claim.params())
            rows = await cur.fetchall()
        return [grant_of(row) for row in rows]


def grant_of(row: Sequence[Any], budget_exceeded: str = "", reserves: bool = False) -> Grant:
    """A grant from a row GRANT_DUE returns (its due reason, if any, one of DueReason's)."""
    workflow_id, step_id, task_type, fence, previous_owner, due_at, late_by, reason = row[:8]
    trace_context, lease_expires_at, sticky_id = row[8:]
    return Grant(
        workflow_id=workflow_id,
        step_id=step_id,
        task_type=task_type,
        fence=fence,
        previous_owner=previous_owner,
        due_at=due_at,
        late_by=late_by,
        due_reason=None if reason is None else DueReason(reason),
        trace_context=trace_context,
        lease_expires_at=lease_expires_at,
        sticky_id=sticky_id,
        budget_exceeded=budget_exceeded,
        reserves=reserves,
    )
