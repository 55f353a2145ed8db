"""The flow claim: grants on a queue whose tasks have flow settings, in fair order, within
every key's limits and rates and every budget (admission.py decides; this module reads the
state under locks and writes back what was decided, in one transaction).

Locks are taken in one order everywhere, so claims on several replicas never wait on each
other in a cycle: task rows (SKIP LOCKED: never waited for), then the keys' limits, then the
budgets, then the fairness rows, each set in key order. Every grant of a task with a key
takes that key's row lock before counting what is in flight under it, so two replicas
never both grant the last place under a limit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from perdure.scheduler.due import grantable_at
from perdure.scheduler.flow.admission import Admission, admit
from perdure.scheduler.flow.model import BudgetState, Candidate, KeyLimit, Scope, TaskFlow
from perdure.scheduler.flow.periods import current_period, rolled
from perdure.scheduler.grants import DUE_COLUMNS, FOR_SESSION, GRANT_DUE, ClaimFor, grant_of
from perdure.scheduler.model import Grant

_CANDIDATE_COLUMNS = """workflow_id, step_id, run_number, flow, priority, fairness_key,
    COALESCE(run_at, lease_expires_at) AS due_at"""
# Expired leases of the queue (any task), then, per fairness key of the queue, its first due
# tasks by priority and due time. Every row returned is locked for this transaction.
CANDIDATES = f"""
WITH expired AS (
    SELECT {_CANDIDATE_COLUMNS}, true AS expired, 0::bigint AS last_turn, 1 AS weight
    FROM scheduler.tasks
    WHERE lease_owner IS NOT NULL AND lease_expires_at <= now() AND {FOR_SESSION}
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), unleased AS (
    SELECT c.*, false AS expired, f.last_turn, COALESCE(l.fairness_weight, 1) AS weight
    FROM scheduler.fairness f
    LEFT JOIN scheduler.flow_limits l
      ON l.namespace = %(namespace)s AND l.key = f.fairness_key
    CROSS JOIN LATERAL (
        SELECT {_CANDIDATE_COLUMNS} FROM scheduler.tasks
        WHERE task_queue = f.task_queue AND fairness_key = f.fairness_key
          AND lease_owner IS NULL AND run_at IS NOT NULL
          AND run_at <= now() + make_interval(secs => %(timer_lookahead)s)
          AND {grantable_at("%(sticky_ids)s::text[]")} <= now()
          AND {FOR_SESSION}
        ORDER BY priority, run_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE f.task_queue = %(task_queue)s
)
SELECT * FROM expired UNION ALL SELECT * FROM unleased
"""

LOCK_LIMITS = """
SELECT key, max_runs, max_steps, requests_per_second, units_per_minute, fairness_weight,
       request_tokens, unit_tokens, refilled_at
FROM scheduler.flow_limits WHERE namespace = %s AND key = ANY(%s)
ORDER BY key FOR UPDATE
"""
# Read once the keys' rows are locked: what is leased under each key now, and the clock the
# rates refill by. A lease past its expiry is not in flight (its holder fenced itself).
IN_FLIGHT = """
SELECT k.key, clock_timestamp(),
       count(t.workflow_id) FILTER (WHERE t.step_id = ''),
       count(t.workflow_id) FILTER (WHERE t.step_id <> '')
FROM unnest(%(keys)s::text[]) AS k(key)
LEFT JOIN scheduler.tasks t
  ON t.flow_keys @> ARRAY[k.key] AND t.flow_namespace = %(namespace)s
 AND t.lease_owner IS NOT NULL AND t.lease_expires_at > now()
GROUP BY k.key
"""
LOCK_BUDGETS = f"""
SELECT scope, name, limit_units, limit_cost, reserved_units, reserved_cost,
       {rolled("spent_units", "period", "period_start")} AS spent_units,
       {rolled("spent_cost", "period", "period_start")} AS spent_cost,
       {rolled("refusals", "period", "period_start")} AS refusals
FROM scheduler.budgets
WHERE namespace = %(namespace)s
  AND (scope = 'namespace'
       OR (scope = 'key' AND name = ANY(%(keys)s))
       OR (scope = 'run' AND (name, run_number) IN (
           SELECT * FROM unnest(%(runs)s::text[], %(run_numbers)s::bigint[]))))
ORDER BY scope, name FOR UPDATE
"""
GRANT = f"""
WITH due AS (
    SELECT {DUE_COLUMNS} FROM scheduler.tasks
    WHERE (workflow_id, step_id) IN (
        SELECT * FROM unnest(%(ids)s::text[], %(step_ids)s::text[]))
){GRANT_DUE}"""
SAVE_BUCKETS = """
UPDATE scheduler.flow_limits l
SET request_tokens = u.request_tokens, unit_tokens = u.unit_tokens, refilled_at = u.refilled_at
FROM unnest(%s::text[], %s::float8[], %s::float8[], %s::timestamptz[])
     AS u(key, request_tokens, unit_tokens, refilled_at)
WHERE l.namespace = %s AND l.key = u.key
"""
SAVE_BUDGETS = f"""
UPDATE scheduler.budgets b
SET reserved_units = u.reserved_units, reserved_cost = u.reserved_cost,
    spent_units = u.spent_units, spent_cost = u.spent_cost, refusals = u.refusals,
    period_start = GREATEST(b.period_start, {current_period("b.period")}), updated_at = now()
FROM unnest(%s::text[], %s::text[], %s::numeric[], %s::numeric[], %s::numeric[],
            %s::numeric[], %s::bigint[])
     AS u(scope, name, reserved_units, reserved_cost, spent_units, spent_cost, refusals)
WHERE b.namespace = %s AND b.scope = u.scope AND b.name = u.name
"""
RESERVE = """
INSERT INTO scheduler.reservations
    (workflow_id, step_id, fence, namespace, budgets, keys, units, cost)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
"""
LOCK_FAIRNESS = """
SELECT 1 FROM scheduler.fairness WHERE task_queue = %s AND fairness_key = ANY(%s)
ORDER BY fairness_key FOR UPDATE
"""
TAKE_TURN = """
UPDATE scheduler.fairness SET last_turn = nextval('scheduler.fair_turns')
WHERE task_queue = %s AND fairness_key = %s
"""


@dataclass(frozen=True)
class FlowClaimed:
    """What a flow claim granted, and when a rate lets through what it held back."""

    grants: list[Grant]
    retry_in: float | None  # seconds (None: nothing waits for a rate)
    held_back: dict[str, int]  # due tasks passed over, by what held them


class FlowGrants:
    """Granting due tasks on queues with flow settings."""

    _pool: AsyncConnectionPool

    async def claim_flow(self, claim: ClaimFor) -> FlowClaimed:
        """Lease up to `claim.limit` grantable tasks of the session's queue, flow settings
        weighed: fair order, limits, rates, budgets (reserved with each grant)."""
        params = claim.params()
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.cursor(row_factory=dict_row).execute(CANDIDATES, params)
            candidates = _ranked([_candidate(row) for row in await cur.fetchall()])
            if not candidates:
                return FlowClaimed([], None, {})
            namespace = claim.build.namespace
            flows = [c.flow for c in candidates if c.flow is not None]
            limits = await _lock_limits(conn, namespace, sorted({k for f in flows for k in f.keys}))
            budgets = await _lock_budgets(conn, namespace, candidates)
            admission = admit(candidates, claim.limit, limits, budgets)
            grants = await _grant(conn, params, admission)
            await _save(conn, namespace, limits, budgets)
            await _reserve(conn, namespace, admission, grants, limits)
            await _take_turns(conn, claim.task_queue, admission)
        return FlowClaimed(grants, admission.retry_in, dict(admission.held_back))


def _candidate(row: dict[str, Any]) -> Candidate:
    flow = row["flow"]
    return Candidate(
        workflow_id=row["workflow_id"],
        step_id=row["step_id"],
        run_number=row["run_number"],
        flow=None
        if flow is None
        else TaskFlow.from_row(flow, row["priority"], row["fairness_key"]),
        fairness_key=row["fairness_key"],
        priority=row["priority"],
        expired=row["expired"],
        due_at=row["due_at"],
        last_turn=row["last_turn"],
        weight=row["weight"],
    )


def _ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Each unleased candidate's place among its fairness key's, by priority and due time."""
    by_key: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        if not candidate.expired:
            by_key[candidate.fairness_key].append(candidate)
    for keyed in by_key.values():
        keyed.sort(key=lambda c: (c.priority, c.due_at))
        for rank, candidate in enumerate(keyed):
            candidate.rank = rank
    return candidates


async def _lock_limits(
    conn: AsyncConnection[Any], namespace: str, keys: list[str]
) -> dict[str, KeyLimit]:
    if not keys:
        return {}
    cur = await conn.execute(LOCK_LIMITS, [namespace, keys])
    limits = {}
    for row in await cur.fetchall():
        key, max_runs, max_steps, rps, upm, weight, request_tokens, unit_tokens, refilled = row
        limits[key] = KeyLimit(
            key=key,
            max_runs=max_runs,
            max_steps=max_steps,
            requests_per_second=rps,
            units_per_minute=upm,
            fairness_weight=weight,
            request_tokens=request_tokens,
            unit_tokens=unit_tokens,
            refilled_at=refilled,
        )
    if not limits:
        return {}
    cur = await conn.execute(IN_FLIGHT, {"keys": list(limits), "namespace": namespace})
    for key, now, runs, steps in await cur.fetchall():
        limit = limits[key]
        limit.runs_in_flight, limit.steps_in_flight = runs, steps
        limit.refill(now)
    return limits


async def _lock_budgets(
    conn: AsyncConnection[Any], namespace: str, candidates: list[Candidate]
) -> dict[str, BudgetState]:
    reserving = [c for c in candidates if c.flow is not None and c.flow.reserves]
    if not reserving:
        return {}
    keys = sorted({k for c in reserving if c.flow for k in c.flow.budget_keys})
    params = {
        "namespace": namespace,
        "keys": keys,
        "runs": [c.workflow_id for c in reserving],
        "run_numbers": [c.run_number for c in reserving],
    }
    cur = await conn.execute(LOCK_BUDGETS, params)
    budgets = {}  # by BudgetState.ref, as admission.budgets_of names them
    for scope, name, *rest in await cur.fetchall():
        limit_units, limit_cost, reserved_units, reserved_cost, spent_units, spent_cost = rest[:6]
        budget = BudgetState(
            Scope(scope),
            name,
            limit_units,
            limit_cost,
            int(reserved_units),
            int(reserved_cost),
            int(spent_units),
            int(spent_cost),
            int(rest[6]),
        )
        budgets[budget.ref] = budget
    return budgets


async def _grant(
    conn: AsyncConnection[Any], params: dict[str, Any], admission: Admission
) -> list[Grant]:
    if not admission.decisions:
        return []
    decided = {(d.candidate.workflow_id, d.candidate.step_id): d for d in admission.decisions}
    ids = {"ids": [w for w, _ in decided], "step_ids": [s for _, s in decided]}
    cur = await conn.execute(GRANT, {**params, **ids})
    grants = []
    for row in await cur.fetchall():
        decision = decided[(row[0], row[1])]
        grants.append(grant_of(row, decision.budget_exceeded, decision.reserves))
    return grants


async def _save(
    conn: AsyncConnection[Any],
    namespace: str,
    limits: dict[str, KeyLimit],
    budgets: dict[str, BudgetState],
) -> None:
    rated = [
        limit
        for limit in limits.values()
        if limit.requests_per_second is not None or limit.units_per_minute is not None
    ]
    if rated:
        await conn.execute(
            SAVE_BUCKETS,
            [
                [limit.key for limit in rated],
                [limit.request_tokens for limit in rated],
                [limit.unit_tokens for limit in rated],
                [limit.refilled_at for limit in rated],
                namespace,
            ],
        )
    # Every budget locked is written back: a new period's reset counts are saved even when
    # nothing was reserved.
    if budgets:
        rows = list(budgets.values())
        await conn.execute(
            SAVE_BUDGETS,
            [
                [str(b.scope) for b in rows],
                [b.name for b in rows],
                [b.reserved_units for b in rows],
                [b.reserved_cost for b in rows],
                [b.spent_units for b in rows],
                [b.spent_cost for b in rows],
                [b.refusals for b in rows],
                namespace,
            ],
        )


async def _reserve(
    conn: AsyncConnection[Any],
    namespace: str,
    admission: Admission,
    grants: list[Grant],
    limits: dict[str, KeyLimit],
) -> None:
    """One reservation per grant of a step with an estimate: the budgets it holds against,
    and its keys whose units allowance it drew from (its report gives back the difference)."""
    fences = {(g.workflow_id, g.step_id): g.fence for g in grants}
    rated = {key for key, limit in limits.items() if limit.units_per_minute is not None}
    rows = [
        (
            d.candidate.workflow_id,
            d.candidate.step_id,
            fences[(d.candidate.workflow_id, d.candidate.step_id)],
            namespace,
            d.reserved,
            [key for key in d.candidate.flow.keys if key in rated],
            d.candidate.flow.estimate_units or 0,
            d.candidate.flow.estimate_cost,
        )
        for d in admission.decisions
        if d.reserves and d.candidate.flow is not None  # (None: never reserves; for mypy)
    ]
    if rows:
        async with conn.cursor() as cur:
            await cur.executemany(RESERVE, rows)


async def _take_turns(conn: AsyncConnection[Any], task_queue: str, admission: Admission) -> None:
    """Give each fairness key served its turn, in the order served: the next claim starts
    from the key served longest ago."""
    served: list[str] = []
    for decision in admission.decisions:
        key = decision.candidate.fairness_key
        if key in served:
            served.remove(key)
        served.append(key)
    if not served:
        return
    await conn.execute(LOCK_FAIRNESS, [task_queue, sorted(served)])
    async with conn.cursor() as cur:
        await cur.executemany(TAKE_TURN, [(task_queue, key) for key in served])
