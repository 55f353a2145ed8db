"""Operators' limits on keys: set, removed, listed with what is in flight under each."""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.flow.model import KeyLimit

# Setting a key's limits replaces them; its buckets start full, as after a long idle time.
SET_LIMIT = """
INSERT INTO scheduler.flow_limits
    (namespace, key, max_runs, max_steps, requests_per_second, units_per_minute,
     fairness_weight, request_tokens, unit_tokens, refilled_at)
VALUES (%(namespace)s, %(key)s, %(max_runs)s, %(max_steps)s, %(requests_per_second)s,
        %(units_per_minute)s, %(fairness_weight)s, 0, 0, NULL)
ON CONFLICT (namespace, key) DO UPDATE
SET max_runs = EXCLUDED.max_runs, max_steps = EXCLUDED.max_steps,
    requests_per_second = EXCLUDED.requests_per_second,
    units_per_minute = EXCLUDED.units_per_minute, fairness_weight = EXCLUDED.fairness_weight,
    updated_at = now()
"""
DELETE_LIMIT = "DELETE FROM scheduler.flow_limits WHERE namespace = %s AND key = %s RETURNING 1"
SELECT_LIMITS = """
SELECT l.key, l.max_runs, l.max_steps, l.requests_per_second, l.units_per_minute,
       l.fairness_weight,
       (SELECT count(*) FROM scheduler.tasks t
        WHERE t.flow_keys @> ARRAY[l.key] AND t.flow_namespace = l.namespace AND t.step_id = ''
          AND t.lease_owner IS NOT NULL AND t.lease_expires_at > now()) AS runs_in_flight,
       (SELECT count(*) FROM scheduler.tasks t
        WHERE t.flow_keys @> ARRAY[l.key] AND t.flow_namespace = l.namespace
          AND t.step_id <> ''
          AND t.lease_owner IS NOT NULL AND t.lease_expires_at > now()) AS steps_in_flight
FROM scheduler.flow_limits l WHERE l.namespace = %s AND (%s::text IS NULL OR l.key = %s)
ORDER BY l.key
"""


class FlowLimits:
    """The keys' limits."""

    _pool: AsyncConnectionPool

    async def set_limit(self, namespace: str, limit: KeyLimit) -> KeyLimit:
        """Set a key's limits (replacing any); the limits as stored, with what is in flight."""
        params: dict[str, Any] = {
            "namespace": namespace,
            "key": limit.key,
            "max_runs": limit.max_runs,
            "max_steps": limit.max_steps,
            "requests_per_second": limit.requests_per_second,
            "units_per_minute": limit.units_per_minute,
            "fairness_weight": limit.fairness_weight,
        }
        async with self._pool.connection() as conn:
            await conn.execute(SET_LIMIT, params)
        return (await self.limits(namespace, limit.key))[0]

    async def delete_limit(self, namespace: str, key: str) -> bool:
        """Remove a key's limits; False when it had none."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(DELETE_LIMIT, [namespace, key])
            return await cur.fetchone() is not None

    async def limits(self, namespace: str, key: str | None = None) -> list[KeyLimit]:
        """The namespace's key limits (or one key's), by key, with what is in flight."""
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_LIMITS, [namespace, key, key])
            return [KeyLimit(**row) for row in await cur.fetchall()]
