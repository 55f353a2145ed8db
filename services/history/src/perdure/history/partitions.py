"""The journal's partitions (migration 0027): events and frames are partitioned by their run's
`part`, ranges of PERDURE_PARTITION_SECONDS (default a week) listed in journal_partitions.

A run takes the newest partition already begun (current_part() in SQL), so partitions are
created ahead (PARTITIONS_AHEAD ranges past now) and a start never waits for one; a history
that was down long fills the gap with one partition up to the current range. Dropping one is
retention.py's: detached (a moment's lock on the parent tables), then dropped."""

from __future__ import annotations

import os

from psycopg import AsyncConnection, sql

from perdure.history.rows import fetch_all, fetch_one

# A week: with 30 days' retention about 9 partitions (5 past, the current one, 3 ahead), since
# every journal statement not pruned to one partition plans and probes each; runs are kept up to
# a week past their retention in exchange.
DEFAULT_PARTITION_SECONDS = 7 * 24 * 3600
PARTITIONS_AHEAD = 3
TABLES = ("events", "frames")  # partitioned alike, by the same ranges

# Creating a partition attaches an empty table: SHARE UPDATE EXCLUSIVE on the parent, which
# reads and writes go on under (CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE).
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('perdure.history.partitions', 0))"
_NEWEST = """SELECT max(hi) AS hi, floor(extract(epoch FROM now()))::bigint AS now
FROM history.journal_partitions"""
_RECORD = "INSERT INTO history.journal_partitions (lo, hi) VALUES (%(lo)s, %(hi)s)"


def partition_seconds() -> int:
    """The width of a partition's range (PERDURE_PARTITION_SECONDS)."""
    raw = os.environ.get("PERDURE_PARTITION_SECONDS", "").strip()
    try:
        value = int(raw) if raw else DEFAULT_PARTITION_SECONDS
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(
            f"PERDURE_PARTITION_SECONDS must be a positive whole number of seconds, not {raw!r}"
        )
    return value


def table(name: str, lo: int) -> sql.Identifier:
    """One partition of `name` (events or frames)."""
    return sql.Identifier("history", f"{name}_{lo}")


async def ensure_ahead(conn: AsyncConnection, width: int) -> int:
    """Create the partitions missing up to PARTITIONS_AHEAD ranges past now, each in its own
    transaction; returns how many. Ranges are aligned on multiples of `width` (the first after
    a change of width, or after a long stop, reaches the next boundary)."""
    created = 0
    while True:
        async with conn.transaction():
            await conn.execute(_LOCK)  # one replica at a time
            row = await fetch_one(conn, _NEWEST, None)
            assert row is not None
            lo, now = row["hi"], row["now"]
            if lo >= now + PARTITIONS_AHEAD * width:
                return created
            hi = max((lo // width + 1) * width, now // width * width)
            await _create(conn, lo, hi)
        created += 1


async def _create(conn: AsyncConnection, lo: int, hi: int) -> None:
    await conn.execute(_RECORD, {"lo": lo, "hi": hi})
    for name in TABLES:
        parent, part = sql.Identifier("history", name), table(name, lo)
        await conn.execute(
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
                part, parent
            )
        )
        await conn.execute(
            sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
                parent, part, sql.Literal(lo), sql.Literal(hi)
            )
        )


# Partitions written to and never analyzed: a new partition has no statistics until
# autovacuum gets to it, and the planner then takes a run's journal for one row (a page read
# as a nested loop over every event). ANALYZE of a young partition is quick.
_UNANALYZED = """SELECT relname FROM pg_stat_user_tables
WHERE schemaname = 'history' AND relname ~ '^(events|frames)_[0-9]+$'
  AND last_analyze IS NULL AND last_autoanalyze IS NULL AND n_mod_since_analyze > 0"""


async def analyze_fresh(conn: AsyncConnection) -> None:
    """ANALYZE the partitions written to since they were created and never analyzed."""
    for row in await fetch_all(conn, _UNANALYZED, None):
        await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier("history", row["relname"])))


async def detach(conn: AsyncConnection, lo: int) -> None:
    """Take partition `lo` out of the journal, in the caller's transaction. DETACH takes
    ACCESS EXCLUSIVE on events and frames, and SHARE ROW EXCLUSIVE on workflows (the events'
    foreign key), until the transaction ends: every journal statement waits that long (the
    caller keeps the transaction to a few catalog changes, and sets a lock_timeout so that a
    long transaction in the way makes it give up, not queue writers). Workflows is locked
    first, as every journal write does (its run's row, then the journal): no deadlock."""
    await conn.execute("LOCK TABLE history.workflows IN SHARE ROW EXCLUSIVE MODE")
    for name in TABLES:
        await conn.execute(
            sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(
                sql.Identifier("history", name), table(name, lo)
            )
        )


async def drop_detached(conn: AsyncConnection, lo: int) -> None:
    """Drop the tables of a detached partition (no lock on the journal's parents; a moment's
    SHARE ROW EXCLUSIVE on workflows, for the foreign key that goes with the events)."""
    for name in TABLES:
        await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table(name, lo)))
