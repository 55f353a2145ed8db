"""Budgets: set, removed and listed by operators (a run's own comes with its start:
tasks.py), and reservations settled: once each, by the worker's report when its TaskDone
brings one, else at their estimate once their lease has ended without one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.flow.periods import current_period, rolled
from perdure.scheduler.model import Lease

# A new limit or period keeps what is reserved, and what was spent in the current period.
SET_BUDGET = """
INSERT INTO scheduler.budgets (namespace, scope, name, limit_units, limit_cost, period)
VALUES (%(namespace)s, %(scope)s, %(name)s, %(limit_units)s, %(limit_cost)s, %(period)s)
ON CONFLICT (namespace, scope, name) DO UPDATE
SET limit_units = EXCLUDED.limit_units, limit_cost = EXCLUDED.limit_cost,
    period = EXCLUDED.period, updated_at = now()
"""
DELETE_BUDGET = """
DELETE FROM scheduler.budgets WHERE namespace = %s AND scope = %s AND name = %s RETURNING 1
"""
SELECT_BUDGETS = f"""
SELECT scope, name, limit_units, limit_cost, period,
       NULLIF(GREATEST(period_start, {current_period("period")}), '-infinity') AS period_start,
       reserved_units, reserved_cost,
       {rolled("spent_units", "period", "period_start")} AS spent_units,
       {rolled("spent_cost", "period", "period_start")} AS spent_cost,
       {rolled("refusals", "period", "period_start")} AS refusals
FROM scheduler.budgets
WHERE namespace = %(namespace)s AND scope = ANY(%(scopes)s)
  AND (%(name)s::text IS NULL OR name = %(name)s)
ORDER BY scope, name
"""


def _settle(ending: str) -> str:
    """SQL: mark settled the open reservations a CTE `ending` (workflow_id, step_id, fence,
    used_units, used_cost, settled_by; used NULL: the estimate) names, returning what each
    held and used. A reservation settled already changes nothing."""
    return f"""
WITH {ending}
UPDATE scheduler.reservations r
SET settled_at = now(), used_units = COALESCE(e.used_units, r.units),
    used_cost = COALESCE(e.used_cost, r.cost), settled_by = e.settled_by
FROM ending e
WHERE r.workflow_id = e.workflow_id AND r.step_id = e.step_id AND r.fence = e.fence
  AND r.settled_at IS NULL
RETURNING r.namespace, r.budgets, r.keys, r.units, r.cost, r.used_units, r.used_cost
"""


# The keys whose units allowance settled reservations drew from get back what their steps
# did not use (or give more): locked in key order, before any budget, as a claim locks them.
LOCK_LIMITS = """
SELECT 1 FROM scheduler.flow_limits
WHERE (namespace, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
ORDER BY namespace, key FOR UPDATE
"""
REFUND_UNITS = """
UPDATE scheduler.flow_limits l SET unit_tokens = l.unit_tokens + u.refund
FROM unnest(%s::text[], %s::text[], %s::float8[]) AS u(namespace, key, refund)
WHERE l.namespace = u.namespace AND l.key = u.key AND l.units_per_minute IS NOT NULL
"""
# Settled amounts move from reserved to spent, in the budget's current period.
LOCK_BUDGETS = """
SELECT 1 FROM scheduler.budgets
WHERE (namespace, scope, name) IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))
ORDER BY namespace, scope, name FOR UPDATE
"""
SPEND = f"""
UPDATE scheduler.budgets b
SET reserved_units = b.reserved_units - d.units, reserved_cost = b.reserved_cost - d.cost,
    spent_units = {rolled("b.spent_units", "b.period", "b.period_start")} + d.used_units,
    spent_cost = {rolled("b.spent_cost", "b.period", "b.period_start")} + d.used_cost,
    refusals = {rolled("b.refusals", "b.period", "b.period_start")},
    period_start = GREATEST(b.period_start, {current_period("b.period")}), updated_at = now()
FROM unnest(%s::text[], %s::text[], %s::text[], %s::numeric[], %s::numeric[], %s::numeric[],
            %s::numeric[]) AS d(namespace, scope, name, units, cost, used_units, used_cost)
WHERE b.namespace = d.namespace AND b.scope = d.scope AND b.name = d.name
"""


# A worker's report (TaskDone.usage), or its absence (the whole estimate), for one lease.
SETTLE_LEASE = _settle("""ending AS (
    SELECT %(workflow_id)s::text AS workflow_id, %(step_id)s::text AS step_id,
           %(fence)s::bigint AS fence, %(units)s::bigint AS used_units,
           %(cost)s::bigint AS used_cost, %(settled_by)s::text AS settled_by
)""")
# Reservations whose lease ended with no TaskDone (it expired, the worker's stream broke, the
# run closed): settled at their estimate, which the attempt may have used.
SETTLE_ENDED = _settle("""ending AS (
    SELECT r.workflow_id, r.step_id, r.fence, NULL::bigint AS used_units,
           NULL::bigint AS used_cost, 'estimate' AS settled_by
    FROM scheduler.reservations r
    LEFT JOIN scheduler.tasks t ON t.workflow_id = r.workflow_id AND t.step_id = r.step_id
    WHERE r.settled_at IS NULL
      AND NOT COALESCE(t.fence = r.fence AND t.lease_owner IS NOT NULL
                       AND t.lease_expires_at > now(), false)
    ORDER BY r.workflow_id, r.step_id, r.fence
    LIMIT 1000
    FOR UPDATE OF r SKIP LOCKED
)""")


# Settled reservations are kept a day (what each step held and used, for an operator's look),
# then deleted, a batch at each sweep.
PRUNE = """
DELETE FROM scheduler.reservations WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM scheduler.reservations
    WHERE settled_at < now() - interval '1 day' LIMIT 1000))
"""


async def _apply(conn: AsyncConnection[Any], settled: list[tuple[Any, ...]]) -> None:
    """Give back to the keys' units allowances and move to the budgets' spent what the
    reservations just settled held and used."""
    refunds: dict[tuple[str, str], int] = defaultdict(int)
    moved: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for namespace, budgets, keys, units, cost, used_units, used_cost in settled:
        for key in keys:
            refunds[namespace, key] += units - used_units
        for held in budgets:
            scope, _, name = held.partition(":")
            totals = moved[namespace, scope, name]
            for index, amount in enumerate((units, cost, used_units, used_cost)):
                totals[index] += amount
    if refunds:
        keys = sorted(refunds)
        await conn.execute(LOCK_LIMITS, [[n for n, _ in keys], [k for _, k in keys]])
        await conn.execute(
            REFUND_UNITS,
            [[n for n, _ in keys], [k for _, k in keys], [float(refunds[k]) for k in keys]],
        )
    if moved:
        refs = sorted(moved)
        columns = [[ref[i] for ref in refs] for i in range(3)]
        await conn.execute(LOCK_BUDGETS, columns)
        await conn.execute(SPEND, [*columns, *([moved[r][i] for r in refs] for i in range(4))])


@dataclass(frozen=True)
class BudgetRow:
    """A budget and its current period's usage."""

    scope: str
    name: str
    limit_units: int | None
    limit_cost: int | None
    period: str
    period_start: datetime | None  # None: a budget with no period
    reserved_units: int
    reserved_cost: int
    spent_units: int
    spent_cost: int
    refusals: int


def _budget_row(row: dict[str, Any]) -> BudgetRow:
    """A budget row, its numeric sums as integers."""
    return BudgetRow(
        scope=row["scope"],
        name=row["name"],
        limit_units=row["limit_units"],
        limit_cost=row["limit_cost"],
        period=row["period"],
        period_start=row["period_start"],
        reserved_units=int(row["reserved_units"]),
        reserved_cost=int(row["reserved_cost"]),
        spent_units=int(row["spent_units"]),
        spent_cost=int(row["spent_cost"]),
        refusals=int(row["refusals"]),
    )


class Budgets:
    """Budgets and the settling of reservations."""

    _pool: AsyncConnectionPool

    async def set_budget(
        self,
        namespace: str,
        scope: str,
        name: str,
        limit_units: int | None,
        limit_cost: int | None,
        period: str,
    ) -> BudgetRow:
        """Set a namespace's or a key's budget; the budget as stored, with its usage."""
        params: dict[str, Any] = {
            "namespace": namespace,
            "scope": scope,
            "name": name,
            "limit_units": limit_units,
            "limit_cost": limit_cost,
            "period": period,
        }
        async with self._pool.connection() as conn:
            await conn.execute(SET_BUDGET, params)
        return (await self.budgets(namespace, [scope], name))[0]

    async def delete_budget(self, namespace: str, scope: str, name: str) -> bool:
        """Remove a budget; False when there was none."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(DELETE_BUDGET, [namespace, scope, name])
            return await cur.fetchone() is not None

    async def budgets(
        self, namespace: str, scopes: list[str], name: str | None = None
    ) -> list[BudgetRow]:
        """The namespace's budgets of these scopes (or the one named), with their usage."""
        params = {"namespace": namespace, "scopes": scopes, "name": name}
        async with self._pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT_BUDGETS, params)
            rows = await cur.fetchall()
        return [_budget_row(row) for row in rows]

    async def settle(self, lease: Lease, units: int | None, cost: int | None) -> None:
        """Settle a step lease's reservation, if it has an open one: at what its worker
        reported, or (units None) at its estimate."""
        params = {
            **lease._asdict(),
            "units": units,
            "cost": cost,
            "settled_by": "estimate" if units is None else "report",
        }
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(SETTLE_LEASE, params)
            await _apply(conn, await cur.fetchall())

    async def settle_ended(self) -> None:
        """Settle at their estimates the reservations whose lease ended without a report;
        delete those settled over a day ago."""
        async with self._pool.connection() as conn:
            async with conn.transaction():
                cur = await conn.execute(SETTLE_ENDED)
                await _apply(conn, await cur.fetchall())
            await conn.execute(PRUNE)
