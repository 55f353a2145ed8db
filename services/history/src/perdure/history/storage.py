"""What the database holds and how fast the journal grows (AdminService.GetStorage, and the
storage metrics).

Nothing here touches the append path: a run's `history_bytes` and `event_count` are kept by
every append's own UPDATE (store.count_event), and the rest is read when asked. The largest
runs are found by scanning the namespace's runs (no index on history_bytes: it changes at
every append, and an index on it would cost every append); an admin call can afford the scan.
The growth rate comes from storage samples (migration 0028): every namespace's totals, taken
by one replica at a time every PERDURE_STORAGE_SAMPLE_INTERVAL seconds.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import namespaces
from perdure.common.background import BackgroundLoop
from perdure.history.fencing import OPEN
from perdure.history.metrics import STORAGE
from perdure.history.model import EventType
from perdure.history.rows import fetch_all, fetch_one
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

DEFAULT_SAMPLE_INTERVAL = 60.0
SAMPLES_KEPT = "1 day"
DEFAULT_TOP = 10
MAX_TOP = 100

# One namespace's runs: a scan of its rows in the runs table.
NAMESPACE_TOTALS = f"""
SELECT count(*) AS runs, count(*) FILTER (WHERE status IN {OPEN}) AS open_runs,
       COALESCE(sum(event_count), 0)::bigint AS events,
       COALESCE(sum(history_bytes), 0)::bigint AS history_bytes
FROM history.workflows WHERE namespace = %s
"""
# Its step outcomes, read from the partial index of step outcomes (events_step_outcome_idx).
NAMESPACE_STEPS = f"""
SELECT count(*) AS steps FROM history.events e JOIN history.workflows w USING (workflow_id)
WHERE w.namespace = %s
  AND e.event_type IN ('{EventType.STEP_COMPLETED}', '{EventType.STEP_FAILED}')
"""
# The largest runs: a scan and a top-N sort (see the module's comment).
LARGEST_RUNS = """
SELECT chain_id, run_id, workflow_type, status, event_count, history_bytes
FROM history.workflows WHERE namespace = %s
ORDER BY history_bytes DESC, run_seq LIMIT %s
"""
# The last two samples of a namespace: the journal's growth between them.
LAST_SAMPLES = """
SELECT sampled_at, events, history_bytes FROM history.storage_samples
WHERE namespace = %s ORDER BY sampled_at DESC LIMIT 2
"""
# The tables of the services' schemas, from the statistics collector (no table is read).
TABLES = """
SELECT s.schemaname || '.' || s.relname AS name,
       pg_table_size(s.relid) AS table_bytes, pg_indexes_size(s.relid) AS index_bytes,
       s.n_live_tup AS live_rows, s.n_dead_tup AS dead_rows
FROM pg_stat_user_tables s
WHERE s.schemaname IN ('history', 'scheduler')
ORDER BY pg_total_relation_size(s.relid) DESC, name
"""
DATABASE_SIZE = "SELECT pg_database_size(current_database()) AS bytes"
HAS_PGSTATTUPLE = "SELECT 1 FROM pg_extension WHERE extname = 'pgstattuple'"
# pgstattuple reads the whole table: only for the tables worth it, and only when installed.
DEAD_SHARE = "SELECT dead_tuple_percent / 100.0 AS share FROM pgstattuple(%s::regclass)"

# The sampler: one replica at a time (a transaction-scoped advisory lock), at most one sample
# per interval whichever replica takes it.
TAKE_SAMPLER_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('perdure.history.storage'))"
SAMPLE_DUE = """
SELECT COALESCE(max(sampled_at) < now() - make_interval(secs => %s), true) AS due
FROM history.storage_samples
"""
TAKE_SAMPLE = """
INSERT INTO history.storage_samples (namespace, runs, events, history_bytes)
SELECT namespace, count(*), COALESCE(sum(event_count), 0), COALESCE(sum(history_bytes), 0)
FROM history.workflows GROUP BY namespace
RETURNING namespace, runs, events, history_bytes
"""
FORGET_SAMPLES = (
    f"DELETE FROM history.storage_samples WHERE sampled_at < now() - interval '{SAMPLES_KEPT}'"
)


def sample_interval() -> float:
    """Seconds between storage samples (PERDURE_STORAGE_SAMPLE_INTERVAL; 0 turns them off)."""
    raw = os.environ.get("PERDURE_STORAGE_SAMPLE_INTERVAL", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_SAMPLE_INTERVAL
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise SystemExit(
            f"PERDURE_STORAGE_SAMPLE_INTERVAL must be a number of seconds (0: off), not {raw!r}"
        )
    return value


async def storage(conn: AsyncConnection, namespace: str, top: int) -> admin.GetStorageResponse:
    """The answer of GetStorage for `namespace`, its `top` largest runs."""
    totals = await fetch_one(conn, NAMESPACE_TOTALS, [namespace])
    steps = await fetch_one(conn, NAMESPACE_STEPS, [namespace])
    assert totals is not None and steps is not None
    largest = await fetch_all(conn, LARGEST_RUNS, [namespace, top])
    database = await fetch_one(conn, DATABASE_SIZE, [])
    assert database is not None
    return admin.GetStorageResponse(
        namespace=admin.StorageNamespace(namespace=namespace, steps=steps["steps"], **totals),
        largest_runs=[
            admin.StorageRun(
                workflow_id=namespaces.split(row["chain_id"])[1],
                run_id=row["run_id"],
                workflow_type=row["workflow_type"],
                status=f"WORKFLOW_STATUS_{row['status']}",
                event_count=row["event_count"],
                history_bytes=row["history_bytes"],
            )
            for row in largest
        ],
        write_rate=_rate(await fetch_all(conn, LAST_SAMPLES, [namespace])),
        database_bytes=database["bytes"],
        tables=await tables(conn),
    )


def _rate(samples: list[dict[str, Any]]) -> admin.StorageWriteRate:
    """The growth between the last two samples (none before there are two). Net growth: runs
    deleted between them count against it, so it is never below zero."""
    if len(samples) < 2:
        return admin.StorageWriteRate()
    latest, before = samples
    seconds = (latest["sampled_at"] - before["sampled_at"]).total_seconds()
    return admin.StorageWriteRate(
        window_seconds=seconds,
        events_per_second=max(0, latest["events"] - before["events"]) / seconds,
        bytes_per_second=max(0, latest["history_bytes"] - before["history_bytes"]) / seconds,
    )


async def tables(conn: AsyncConnection) -> list[admin.StorageTable]:
    """Every table of the services' schemas, with its dead tuples' share: measured by
    pgstattuple when it is installed, else estimated from the collector's counters."""
    measured = await fetch_one(conn, HAS_PGSTATTUPLE, []) is not None
    listed = []
    for row in await fetch_all(conn, TABLES, []):
        live, dead = row["live_rows"], row["dead_rows"]
        share, source = (dead / (live + dead) if live + dead else 0.0), "estimate"
        if measured and (found := await _measured_dead_share(conn, row["name"])) is not None:
            share, source = found, "pgstattuple"
        listed.append(
            admin.StorageTable(
                name=row["name"],
                table_bytes=row["table_bytes"],
                index_bytes=row["index_bytes"],
                live_rows=live,
                dead_rows=dead,
                dead_share=share,
                dead_share_source=source,
            )
        )
    return listed


async def _measured_dead_share(conn: AsyncConnection, table: str) -> float | None:
    """pgstattuple's dead share of `table`; None when the database's role may not run it
    (it needs pg_stat_scan_tables): the estimate stands then."""
    try:
        async with conn.transaction():
            found = await fetch_one(conn, DEAD_SHARE, [table])
    except psycopg.errors.InsufficientPrivilege:
        return None
    return None if found is None else float(found["share"])


class StorageSampler(BackgroundLoop):
    """Takes a storage sample every interval, when no other replica has taken one since; the
    storage gauges report the last one this replica took."""

    def __init__(self, pool: AsyncConnectionPool, interval: float) -> None:
        super().__init__("storage sampler", self._sample_untraced, interval or 1.0)
        self._pool = pool
        self._interval = interval

    def start(self) -> None:
        """Sample in the background (not at all with an interval of 0)."""
        if self._interval > 0:
            super().start()

    async def _sample_untraced(self) -> None:
        with untraced():
            await self.sample()

    async def sample(self) -> bool:
        """Take a sample if one is due and no other replica is taking it; whether one was."""
        async with self._pool.connection() as conn, conn.transaction():
            locked = await fetch_one(conn, TAKE_SAMPLER_LOCK, [])
            due = await fetch_one(conn, SAMPLE_DUE, [self._interval * 0.9])
            if not (locked and locked["pg_try_advisory_xact_lock"] and due and due["due"]):
                STORAGE.namespaces, STORAGE.database_bytes = {}, None  # another replica's now
                return False
            rows = await fetch_all(conn, TAKE_SAMPLE, [])
            await conn.execute(FORGET_SAMPLES)
            database = await fetch_one(conn, DATABASE_SIZE, [])
        STORAGE.namespaces = {row["namespace"]: row for row in rows}
        STORAGE.database_bytes = database["bytes"] if database else None
        return True
