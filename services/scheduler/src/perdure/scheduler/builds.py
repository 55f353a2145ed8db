"""Routing by build: which sessions may take a workflow task, by the routing policy of its
workflow type in its namespace and the build of the worker (Hello.build_id).

- unversioned (no policy row, the default): any session serving the type;
- pinned: a run's tasks go only to sessions of the build its first task was granted to (the
  task's `build_id`) until the run closes; a run not yet started goes to the newest build;
- auto-upgrade: every task goes to the newest build.

The newest build of a workflow type on a queue is, among the builds with a connected session
serving the type, the one first seen last (the `builds` table keeps first and last sight).
Step tasks are not routed by build. A task no session may take waits, like a task of a type
nobody serves: fencing keeps every grant safe whatever the routing says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors

PINNED = "pinned"
AUTO_UPGRADE = "auto-upgrade"
# The policies stored, by their API value; ROUTING_POLICY_UNVERSIONED is the absence of a row.
STORED: dict[int, str] = {
    admin.ROUTING_POLICY_PINNED: PINNED,
    admin.ROUTING_POLICY_AUTO_UPGRADE: AUTO_UPGRADE,
}
API_VALUE: dict[str, int] = {name: value for value, name in STORED.items()}


def routed() -> str:
    """SQL, over a row of `scheduler.tasks`: whether the claiming session may take it. Its
    parameters: the session's namespace, its build, and the workflow types of which its build
    is the newest (`newest`)."""
    # The inner COALESCE makes a NULL build (a run not started) a "no" to the pinned check;
    # the outer one makes no policy row a "yes".
    return f"""(step_id <> '' OR COALESCE((
        SELECT CASE p.policy
            WHEN '{AUTO_UPGRADE}' THEN p.workflow_type = ANY(%(newest)s)
            ELSE COALESCE(scheduler.tasks.build_id = %(build)s,
                          p.workflow_type = ANY(%(newest)s))
            END
        FROM scheduler.workflow_policies p
        WHERE p.namespace = %(namespace)s AND p.workflow_type = scheduler.tasks.workflow_type
    ), true))"""


# A build's workers connected again: it keeps its first sight; the types it serves accumulate.
REGISTER_BUILD = """
INSERT INTO scheduler.builds (task_queue, build_id, namespace, workflow_types)
VALUES (%(task_queue)s, %(build)s, %(namespace)s, %(types)s)
ON CONFLICT (task_queue, build_id) DO UPDATE
SET last_seen_at = now(),
    workflow_types = ARRAY(
        SELECT DISTINCT unnest(scheduler.builds.workflow_types || EXCLUDED.workflow_types)
        ORDER BY 1)
RETURNING first_seen_at
"""

SET_POLICY = """
INSERT INTO scheduler.workflow_policies (namespace, workflow_type, policy)
VALUES (%(namespace)s, %(workflow_type)s, %(policy)s)
ON CONFLICT (namespace, workflow_type) DO UPDATE SET policy = EXCLUDED.policy, updated_at = now()
RETURNING namespace, workflow_type, policy, updated_at
"""

# Unversioned is no row; the answer still says when it was set.
CLEAR_POLICY = """
WITH gone AS (
    DELETE FROM scheduler.workflow_policies
    WHERE namespace = %(namespace)s AND workflow_type = %(workflow_type)s
)
SELECT %(namespace)s AS namespace, %(workflow_type)s AS workflow_type, NULL AS policy,
       now() AS updated_at
"""

SELECT_POLICIES = """
SELECT namespace, workflow_type, policy, updated_at FROM scheduler.workflow_policies
WHERE namespace = %s ORDER BY workflow_type
"""

SELECT_BUILDS = """
SELECT task_queue, build_id, workflow_types, first_seen_at, last_seen_at FROM scheduler.builds
WHERE namespace = %(namespace)s AND (%(task_queue)s = '' OR task_queue = %(task_queue)s)
ORDER BY task_queue, first_seen_at DESC, build_id
"""


def policy_of(value: int) -> str | None:
    """The stored name of a requested policy (None: unversioned); INVALID_ARGUMENT for none."""
    if value == admin.ROUTING_POLICY_UNVERSIONED:
        return None
    if value not in STORED:
        raise errors.invalid_argument(
            "policy must be ROUTING_POLICY_PINNED, ROUTING_POLICY_AUTO_UPGRADE or "
            f"ROUTING_POLICY_UNVERSIONED (to remove the type's policy), not {value}"
        )
    return STORED[value]


class Routable(Protocol):
    """What routing reads of a session."""

    @property
    def task_queue(self) -> str: ...
    @property
    def workflow_types(self) -> list[str]: ...
    @property
    def build_id(self) -> str: ...
    @property
    def build_seen(self) -> datetime | None: ...


def newest_builds(sessions: Iterable[Routable]) -> dict[tuple[str, str], str]:
    """Per (task queue, workflow type) served by a connected session: the newest build (first
    seen last; among builds first seen together, the greatest id, so every replica agrees)."""
    best: dict[tuple[str, str], tuple[datetime, str]] = {}
    for session in sessions:
        if session.build_seen is None:
            continue
        mark = (session.build_seen, session.build_id)
        for workflow_type in session.workflow_types:
            key = (session.task_queue, workflow_type)
            if key not in best or best[key] < mark:
                best[key] = mark
    return {key: build for key, (_, build) in best.items()}


@dataclass(frozen=True)
class BuildRow:
    """A build seen on a task queue."""

    task_queue: str  # qualified
    build_id: str
    workflow_types: list[str]
    first_seen_at: datetime
    last_seen_at: datetime


@dataclass(frozen=True)
class PolicyRow:
    """A workflow type's routing policy (`policy` None: unversioned)."""

    namespace: str
    workflow_type: str
    policy: str | None
    updated_at: datetime


class Builds:
    """The builds seen and the routing policies, in the scheduler schema."""

    _pool: AsyncConnectionPool

    async def register_build(
        self, task_queue: str, namespace: str, build_id: str, types: list[str]
    ) -> datetime:
        """Note that a worker of `build_id` connected to a queue; return the build's first
        sight there."""
        params = {
            "task_queue": task_queue,
            "namespace": namespace,
            "build": build_id,
            "types": types,
        }
        async with self._pool.connection() as conn:
            cur = await conn.execute(REGISTER_BUILD, params)
            row = await cur.fetchone()
        assert row is not None
        first_seen: datetime = row[0]
        return first_seen

    async def set_policy(self, namespace: str, workflow_type: str, policy: str | None) -> PolicyRow:
        """Set (or, with None, remove) a workflow type's policy."""
        params = {"namespace": namespace, "workflow_type": workflow_type, "policy": policy}
        statement = CLEAR_POLICY if policy is None else SET_POLICY
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            row = await cur.fetchone()
        assert row is not None
        return PolicyRow(**row)

    async def policies(self, namespace: str) -> list[PolicyRow]:
        """The namespace's policies, by workflow type."""
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(SELECT_POLICIES, [namespace])
            return [PolicyRow(**row) for row in await cur.fetchall()]

    async def builds(self, namespace: str, task_queue: str = "") -> list[BuildRow]:
        """The builds seen on the namespace's queues (or one qualified queue), newest first."""
        params = {"namespace": namespace, "task_queue": task_queue}
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(SELECT_BUILDS, params)
            return [BuildRow(**row) for row in await cur.fetchall()]
