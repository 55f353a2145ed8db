"""Retention: closed runs are deleted once past their namespace's retention (PERDURE_RETENTION,
default 30 days; per namespace with SetRetention), whole partitions of the journal at a time.

One pass (one history replica at a time, under an advisory lock; bounded work):
- creates the journal's partitions ahead (partitions.py);
- drops each partition whose range has ended and whose runs are all closed and expired: the
  runs go to the archive hook first (if it raises, nothing is deleted), then the partition is
  detached (a moment's ACCESS EXCLUSIVE lock on events and frames) and dropped, and the runs'
  rows in the other tables deleted;
- in a partition held back by a run still open (or kept longer by its namespace), deletes the
  expired closed runs row by row, a batch at a time (the slow path): the partition drops when
  its last holder is gone;
- deletes the payloads stored by content that no remaining partition references;
- deletes the frames of runs closed longer than PERDURE_STREAM_RETENTION (default 7 days).

A run still RUNNING, WAITING or PARKED (it may be resumed) is never deleted."""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

from perdure.common.background import BackgroundLoop
from perdure.history import partitions
from perdure.history.metrics import count_partition_dropped, count_runs_deleted
from perdure.history.rows import fetch_all
from perdure.telemetry.propagation import untraced

DEFAULT_RETENTION = 30 * 24 * 3600.0
DEFAULT_STREAM_RETENTION = 7 * 24 * 3600.0
MAX_PASS_INTERVAL = 60.0
BATCH = 200  # runs one slow-path (or frame, or run-row) statement deletes
MAX_BATCHES = 10  # slow-path batches per pass
MAX_DROPS = 4  # partitions dropped per pass
LOCK_TIMEOUT = "500ms"  # a detach gives up (and tries at the next pass) rather than queue writes
PASS_LOCK = "SELECT pg_try_advisory_lock(hashtextextended('perdure.history.retention', 0))"
PASS_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended('perdure.history.retention', 0))"

# Called with the run keys of closed runs about to be deleted, in the deleting transaction,
# before anything is deleted; raising deletes nothing (the runs stay for the next pass).
Archive = Callable[[AsyncConnection, Sequence[str]], Awaitable[None]]


def parse_retention(raw: str, name: str) -> float:
    """A retention in seconds ('forever': infinity), or ValueError saying what is accepted."""
    text = raw.strip().lower()
    if text == "forever":
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds or 'forever', not {raw!r}")
    return value


def _setting(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return parse_retention(raw, name) if raw else default
    except ValueError as error:
        raise SystemExit(str(error)) from None


def default_retention() -> float:
    """How long a closed run is kept where its namespace sets nothing (PERDURE_RETENTION)."""
    return _setting("PERDURE_RETENTION", DEFAULT_RETENTION)


def stream_retention() -> float:
    """How long a closed run's frames are kept (PERDURE_STREAM_RETENTION, seconds)."""
    return _setting("PERDURE_STREAM_RETENTION", DEFAULT_STREAM_RETENTION)


@dataclass(frozen=True)
class RetentionSettings:
    retention: float  # the default, seconds (math.inf: forever)
    stream_retention: float
    partition_seconds: int

    @classmethod
    def from_env(cls) -> RetentionSettings:
        return cls(default_retention(), stream_retention(), partitions.partition_seconds())

    @property
    def interval(self) -> float:
        """Seconds between passes: often enough to create partitions well ahead."""
        return min(self.partition_seconds / 4, self.stream_retention / 10, MAX_PASS_INTERVAL)


# Whether a run is past its retention (w: workflows, r: its namespace_retention row or NULL).
_EXPIRED = """(w.status NOT IN ('RUNNING', 'WAITING', 'PARKED') AND w.closed_at IS NOT NULL
    AND extract(epoch FROM now() - w.closed_at) > COALESCE(r.seconds, %(default)s::float8))"""
_RUNS = """FROM history.workflows w LEFT JOIN history.namespace_retention r USING (namespace)
    WHERE w.part = %(lo)s"""
# The partitions no run can start in any more (older than the newest begun), oldest first.
_ENDED = """SELECT lo FROM history.journal_partitions
WHERE lo < history.current_part() AND NOT dropped ORDER BY lo"""
# Open and latest closed runs first (the index's order): a held partition is found held at
# once, whatever its number of expired runs.
_HELD = f"""SELECT EXISTS (
    SELECT 1 {_RUNS} AND NOT {_EXPIRED} ORDER BY w.closed_at DESC NULLS FIRST LIMIT 1) AS held"""
_EXPIRED_RUNS = f"""SELECT w.workflow_id, w.run_id {_RUNS} AND {_EXPIRED}
ORDER BY w.closed_at LIMIT %(batch)s FOR UPDATE OF w SKIP LOCKED"""
_ALL_RUNS = "SELECT workflow_id, run_id FROM history.workflows WHERE part = %(lo)s"
_DROPPED = "SELECT lo FROM history.journal_partitions WHERE dropped ORDER BY lo"
_MARK_DROPPED = "UPDATE history.journal_partitions SET dropped = true WHERE lo = %(lo)s"
_FORGET = "DELETE FROM history.journal_partitions WHERE lo = %(lo)s"
# A run's rows outside the journal's partitioned tables (keys: run keys; runs: run ids).
_RUN_ROWS = (
    "DELETE FROM history.step_tasks WHERE workflow_id = ANY(%(keys)s)",
    "DELETE FROM history.step_progress WHERE workflow_id = ANY(%(keys)s)",
    "DELETE FROM history.approvals WHERE run_key = ANY(%(keys)s)",
    "DELETE FROM history.outbox WHERE workflow_id = ANY(%(keys)s)",
    "DELETE FROM history.stream_heads WHERE run_id = ANY(%(runs)s)",
    "DELETE FROM history.child_notices WHERE run_id = ANY(%(runs)s)",
)
_JOURNAL_ROWS = (
    "DELETE FROM history.signal_consumptions WHERE part = %(lo)s AND workflow_id = ANY(%(keys)s)",
    "DELETE FROM history.events WHERE part = %(lo)s AND workflow_id = ANY(%(keys)s)",
    "DELETE FROM history.frames WHERE part = %(lo)s AND run_id = ANY(%(runs)s)",
)
_DELETE_RUNS = "DELETE FROM history.workflows WHERE workflow_id = ANY(%(keys)s)"
# Payloads that a dropped partition `lo` may have referenced and no partition left can.
_COLLECT_PAYLOADS = """DELETE FROM history.payloads WHERE sha256 IN (
    SELECT p.sha256 FROM history.payloads p
    WHERE p.first_part <= %(lo)s AND p.last_part >= %(lo)s AND NOT EXISTS (
        SELECT FROM history.journal_partitions j
        WHERE NOT j.dropped AND j.lo BETWEEN p.first_part AND p.last_part)
    LIMIT %(batch)s)"""
# Frames of runs closed longer ago than the stream retention, a batch of runs at a time.
_EXPIRED_STREAMS = """SELECT DISTINCT h.run_id, w.part FROM history.stream_heads h
JOIN history.workflows w USING (run_id)
WHERE extract(epoch FROM now() - w.closed_at) > %(retention)s
LIMIT %(batch)s"""
_DELETE_FRAMES = "DELETE FROM history.frames WHERE run_id = ANY(%(runs)s) AND part = ANY(%(parts)s)"
_DELETE_HEADS = "DELETE FROM history.stream_heads WHERE run_id = ANY(%(runs)s)"


async def _no_archive(conn: AsyncConnection, run_keys: Sequence[str]) -> None:
    """No archive: deleted runs are gone."""


class Retention(BackgroundLoop):
    """The retention pass, every `settings.interval` seconds."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        settings: RetentionSettings,
        archive: Archive | None = None,
    ) -> None:
        super().__init__("retention", self.run_pass, settings.interval)
        self._pool = pool
        self._settings = settings
        self._archive = archive or _no_archive

    async def prepare(self) -> None:
        """Create the partitions ahead, before history serves (a pass does it afterwards)."""
        async with self._pool.connection() as conn:
            await partitions.ensure_ahead(conn, self._settings.partition_seconds)

    async def run_pass(self) -> None:
        """One pass, if no other replica is in one."""
        with untraced():
            async with self._pool.connection() as conn:
                row = await (await conn.execute(PASS_LOCK)).fetchone()
                if not (row and row[0]):
                    return
                try:
                    await self._pass(conn)
                finally:
                    await conn.execute(PASS_UNLOCK)

    async def _pass(self, conn: AsyncConnection) -> None:
        await partitions.ensure_ahead(conn, self._settings.partition_seconds)
        await partitions.analyze_fresh(conn)
        for row in await fetch_all(conn, _DROPPED, None):
            await self._finish_drop(conn, row["lo"])
        drops, batches = 0, 0
        for row in await fetch_all(conn, _ENDED, None):
            lo = row["lo"]
            while batches < MAX_BATCHES and await self._held(conn, lo):
                deleted = await self._delete_expired(conn, lo)
                batches += 1
                if deleted < BATCH:
                    break
            if drops < MAX_DROPS and not await self._held(conn, lo) and await self._drop(conn, lo):
                drops += 1
        while await self._expire_frames(conn) == BATCH:
            pass

    def _params(self, **params: object) -> dict[str, object]:
        return {"default": self._settings.retention, "batch": BATCH, **params}

    async def _held(self, conn: AsyncConnection, lo: int) -> bool:
        """Whether partition `lo` holds a run that is open or not past its retention."""
        rows = await fetch_all(conn, _HELD, self._params(lo=lo))
        return bool(rows[0]["held"])

    async def _delete_expired(self, conn: AsyncConnection, lo: int) -> int:
        """The slow path: a batch of the expired runs of a partition kept for others, archived
        then deleted row by row; returns how many."""
        async with conn.transaction():
            rows = await fetch_all(conn, _EXPIRED_RUNS, self._params(lo=lo))
            if not rows:
                return 0
            keys = [row["workflow_id"] for row in rows]
            runs = [row["run_id"] for row in rows]
            await self._archive(conn, keys)
            for statement in (*_JOURNAL_ROWS, *_RUN_ROWS, _DELETE_RUNS):
                await conn.execute(statement, {"lo": lo, "keys": keys, "runs": runs})
        count_runs_deleted(len(rows), "rows")
        return len(rows)

    async def _drop(self, conn: AsyncConnection, lo: int) -> bool:
        """The fast path: archive every run of partition `lo`, then detach and drop it; False
        when a run came to hold it meanwhile (or the lock was not granted in time)."""
        async with conn.transaction():
            if await self._held(conn, lo):
                return False
            keys = [row["workflow_id"] for row in await fetch_all(conn, _ALL_RUNS, {"lo": lo})]
            for start in range(0, len(keys), BATCH):  # the archive takes a batch at a time
                await self._archive(conn, keys[start : start + BATCH])
            # Their consumptions reference the partition's events: a detach checks none does.
            await conn.execute(
                "DELETE FROM history.signal_consumptions WHERE part = %(lo)s", {"lo": lo}
            )
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                await partitions.detach(conn, lo)
                if await self._held(conn, lo):  # checked again under the lock
                    raise _HeldError
                await conn.execute(_MARK_DROPPED, {"lo": lo})
        except (_HeldError, errors.LockNotAvailable):
            return False
        count_partition_dropped()
        await self._finish_drop(conn, lo)
        return True

    async def _finish_drop(self, conn: AsyncConnection, lo: int) -> None:
        """Drop a detached partition's tables and delete its runs' other rows, a batch at a
        time (again after a crash, from the `dropped` mark)."""
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                await partitions.drop_detached(conn, lo)
        except errors.LockNotAvailable:
            return  # the next pass finishes it
        while True:
            async with conn.transaction():
                rows = await fetch_all(conn, _ALL_RUNS + " LIMIT %(batch)s", self._params(lo=lo))
                keys = [row["workflow_id"] for row in rows]
                runs = [row["run_id"] for row in rows]
                for statement in (*_RUN_ROWS, _DELETE_RUNS):
                    await conn.execute(statement, {"keys": keys, "runs": runs})
            count_runs_deleted(len(rows), "partition")
            if len(rows) < BATCH:
                break
        # Its payloads, then the partition is forgotten (a crash before: collected again).
        while await self._execute_batch(conn, _COLLECT_PAYLOADS, self._params(lo=lo)) == BATCH:
            pass
        await conn.execute(_FORGET, {"lo": lo})

    async def _execute_batch(
        self, conn: AsyncConnection, statement: str, params: dict[str, object]
    ) -> int:
        cursor = await conn.execute(statement, params)
        return cursor.rowcount

    async def _expire_frames(self, conn: AsyncConnection) -> int:
        """Delete the frames of a batch of runs closed longer than the stream retention."""
        params = {"retention": self._settings.stream_retention, "batch": BATCH}
        async with conn.transaction():
            rows = await fetch_all(conn, _EXPIRED_STREAMS, params)
            runs = [row["run_id"] for row in rows]
            parts = sorted({row["part"] for row in rows})
            if runs:
                await conn.execute(_DELETE_FRAMES, {"runs": runs, "parts": parts})
                await conn.execute(_DELETE_HEADS, {"runs": runs})
        return len(runs)


class _HeldError(Exception):
    """A run holds the partition after all: the detach is undone."""
