"""Streams: the chunks step attempts emit (current_step().emit), stored as frames outside the
journal, numbered 1, 2, 3, ... per run and stream (migration 0017).

A frame's number comes from its stream's head row (stream_heads), updated in the transaction
that stores the frame: the row lock makes the transactions of one stream commit in number
order, so a reader never sees a later frame before an earlier one. An emit takes a share lock
on the run's row first (every journal append updates that row): the step's state it checks
cannot change before it commits, and a failed attempt's RESET frame (reset_streams, called by
the events trigger in the same transaction as the failure) always follows its last DATA frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, limits
from perdure.common.convert import timestamp
from perdure.common.reasons import Reason
from perdure.history import fencing
from perdure.history.appends import JournalBase
from perdure.history.fencing import OPEN, run_lease_held, step_lease_held
from perdure.history.model import Lease
from perdure.history.rows import Row, fetch_all, fetch_one

MAX_CHUNKS = 1000  # per EmitFrames call
PAGE_ROWS = 1000
FRAME_FRAMING = 64  # a StreamFrame's bytes beyond its data, stream and step id, at most

# The lease, under a share lock on the run's row: no append commits until the emit does.
_RUN_LEASE = f"""SELECT w.run_id, w.cancel_requested FROM history.workflows w
WHERE {run_lease_held("w.")} FOR SHARE OF w"""
_STEP_LEASE = f"""SELECT w.run_id, w.cancel_requested FROM history.step_tasks s
JOIN history.workflows w USING (workflow_id)
WHERE {step_lease_held("s.")} AND w.status IN {OPEN} FOR SHARE OF w, s"""

# What became of the step's attempts (its outcome, the last attempt failed, the last started),
# and how many of this attempt's chunks the stream holds (stored in order, without gaps), read
# under the stream head's lock.
_STEP_STATE = """
SELECT EXISTS (SELECT 1 FROM history.events e
               WHERE e.workflow_id = %(workflow_id)s AND e.step_id = %(step_id)s
                 AND e.event_type IN ('STEP_COMPLETED', 'STEP_FAILED')) AS closed,
       (SELECT max(e.attempt) FROM history.events e
        WHERE e.workflow_id = %(workflow_id)s AND e.step_id = %(step_id)s
          AND e.event_type = 'STEP_ATTEMPT_FAILED') AS failed,
       (SELECT max(e.attempt) FROM history.events e
        WHERE e.workflow_id = %(workflow_id)s AND e.step_id = %(step_id)s
          AND e.event_type = 'STEP_ATTEMPT_STARTED') AS started,
       (SELECT COALESCE(max(f.emit_index) + 1, 0) FROM history.frames f
        WHERE f.run_id = %(run_id)s AND f.stream = %(stream)s AND f.step_id = %(step_id)s
          AND f.attempt = %(attempt)s AND f.kind = 'DATA') AS stored,
       (SELECT f.seq FROM history.frames f
        WHERE f.run_id = %(run_id)s AND f.stream = %(stream)s AND f.step_id = %(step_id)s
          AND f.attempt = %(attempt)s AND f.kind = 'DATA' AND f.emit_index = %(last_index)s)
           AS last_seq
"""

# The stream's head, locked until the commit (created at 0 by the stream's first frame).
_LOCK_HEAD = """
INSERT INTO history.stream_heads (run_id, stream) VALUES (%(run_id)s, %(stream)s)
ON CONFLICT (run_id, stream) DO UPDATE SET last_seq = stream_heads.last_seq
RETURNING last_seq
"""
# An attempt's first frame on a stream whose last frame of the step is an earlier attempt's
# DATA: that attempt was lost and its failure is not recorded yet; reset it now.
_GUARD_RESET = "SELECT history.reset_streams(%(run_id)s, %(step_id)s, %(attempt)s, %(stream)s)"
# The new chunks, numbered on from the head, and the notification of the run's watchers (sent
# at the commit).
_INSERT_FRAMES = """
WITH head AS (
    UPDATE history.stream_heads SET last_seq = last_seq + %(count)s
    WHERE run_id = %(run_id)s AND stream = %(stream)s
    RETURNING last_seq - %(count)s AS base
), stored AS (
    INSERT INTO history.frames
        (run_id, stream, seq, step_id, attempt, kind, emit_index, data, encoding)
    SELECT %(run_id)s, %(stream)s, head.base + c.n, %(step_id)s, %(attempt)s, 'DATA',
           %(first_index)s + c.n - 1, c.data, c.encoding
    FROM head,
         unnest(%(data)s::bytea[], %(encodings)s::text[]) WITH ORDINALITY AS c(data, encoding, n)
    RETURNING seq
)
SELECT max(seq) AS last_seq, pg_notify('perdure_run', %(workflow_id)s) FROM stored
"""
# A page of a stream, within a byte budget (the first frame always, whatever its size).
_PAGE = """
SELECT seq, stream, step_id, attempt, kind, data, encoding, created_at FROM (
    SELECT f.*, sum(COALESCE(octet_length(f.data), 0) + %(framing)s)
               OVER (ORDER BY f.seq) AS running
    FROM (SELECT * FROM history.frames
          WHERE run_id = %(run_id)s AND stream = %(stream)s AND seq > %(after)s
          ORDER BY seq LIMIT %(rows)s) f
) page
WHERE running <= %(budget)s OR seq = (
    SELECT min(seq) FROM history.frames
    WHERE run_id = %(run_id)s AND stream = %(stream)s AND seq > %(after)s)
ORDER BY seq
"""
# The run's status and key, and a page of its stream, in one snapshot: a run closed in it has
# no frame to come after the page's (no frame is stored once a run is closed).
_STATUS_AND_PAGE = f"""
SELECT w.status, w.workflow_id AS run_key, page.*
FROM history.workflows w LEFT JOIN ({_PAGE}) page ON true
WHERE w.run_id = %(run_id)s
ORDER BY page.seq
"""
# Frames of runs closed longer ago than the retention, a batch of runs at a time.
_EXPIRED_RUNS = """
SELECT DISTINCT h.run_id FROM history.stream_heads h JOIN history.workflows w USING (run_id)
WHERE w.closed_at < now() - make_interval(secs => %(retention)s)
LIMIT %(batch)s
"""
_DELETE_FRAMES = "DELETE FROM history.frames WHERE run_id = ANY(%(runs)s)"
_DELETE_HEADS = "DELETE FROM history.stream_heads WHERE run_id = ANY(%(runs)s)"


@dataclass(frozen=True)
class Emitted:
    """What an EmitFrames call stored: the last chunk's sequence number."""

    last_seq: int
    cancel_requested: bool


class Streams(JournalBase):
    """Storing frames under a step attempt's lease, and reading them back."""

    async def emit(
        self,
        lease: Lease,
        step_id: str,
        attempt: int,
        stream: str,
        first_index: int,
        chunks: Sequence[Payload],
    ) -> Emitted:
        """Store the attempt's chunks `first_index`, `first_index` + 1, ... on the stream, those
        not stored yet (a batch sent again is stored once), under the lease (a lease with a step
        id is the remote step's own)."""
        params: dict[str, object] = {
            **fencing.lease_params(lease),
            "step_id": step_id,
            "attempt": attempt,
            "stream": stream,
            "first_index": first_index,
            "last_index": first_index + len(chunks) - 1,
        }
        async with self._pool.connection() as conn, conn.transaction():
            run = await fetch_one(conn, _STEP_LEASE if lease.step_id else _RUN_LEASE, params)
            if run is None:
                raise await fencing.rejection(conn, lease)
            params["run_id"] = run["run_id"]
            await conn.execute(_LOCK_HEAD, params)
            state = await fetch_one(conn, _STEP_STATE, params)
            assert state is not None  # aggregates without FROM: one row
            _require_running(state, step_id, attempt)
            stored: int = state["stored"]
            if first_index > stored:
                raise errors.invalid_argument(
                    f"first_index {first_index} skips chunks: attempt {attempt} of step "
                    f"{step_id!r} has {stored} stored on stream {stream!r}; send them first, "
                    "in order"
                )
            fresh = chunks[stored - first_index :]
            if not fresh:  # all stored already: a batch sent again
                return Emitted(state["last_seq"], run["cancel_requested"])
            if stored == 0 and attempt > 1:
                await conn.execute(_GUARD_RESET, params)
            params.update(
                first_index=stored,
                count=len(fresh),
                data=[chunk.data for chunk in fresh],
                encodings=[chunk.encoding for chunk in fresh],
            )
            inserted = await fetch_one(conn, _INSERT_FRAMES, params)
        assert inserted is not None
        self._on_committed(lease.workflow_id, False)
        return Emitted(inserted["last_seq"], run["cancel_requested"])

    async def frames_page(
        self, run_id: str, stream: str, after_seq: int
    ) -> tuple[Row, list[wf.StreamFrame]]:
        """The run (its status and current key) and its stream's frames after `after_seq`,
        oldest first, as many as fit in a message, as one snapshot shows them."""
        params = {
            "run_id": run_id,
            "stream": stream,
            "after": after_seq,
            "rows": PAGE_ROWS,
            "framing": FRAME_FRAMING + len(stream.encode()),
            "budget": limits.HISTORY_PAGE_BYTES,
        }
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, _STATUS_AND_PAGE, params)
        if not rows:
            raise errors.not_found(Reason.RUN_NOT_FOUND, f"run {run_id!r} is gone")
        return rows[0], [_frame(row) for row in rows if row["seq"] is not None]

    async def delete_expired_frames(self, retention: float, batch: int) -> int:
        """Delete the frames (and stream heads) of up to `batch` runs closed longer than
        `retention` seconds ago; returns how many runs."""
        async with self._pool.connection() as conn, conn.transaction():
            rows = await fetch_all(conn, _EXPIRED_RUNS, {"retention": retention, "batch": batch})
            runs = [row["run_id"] for row in rows]
            if runs:
                await conn.execute(_DELETE_FRAMES, {"runs": runs})
                await conn.execute(_DELETE_HEADS, {"runs": runs})
        return len(runs)


def _require_running(state: Row, step_id: str, attempt: int) -> None:
    """Refuse frames of an attempt that is over (STEP_CLOSED): the step has its outcome, this
    attempt's failure is recorded, or a later attempt started."""
    over = None
    if state["closed"]:
        over = "has its outcome already"
    elif state["failed"] is not None and state["failed"] >= attempt:
        over = f"recorded attempt {state['failed']} failed"
    elif state["started"] is not None and state["started"] > attempt:
        over = f"started attempt {state['started']}"
    if over is not None:
        raise errors.failed_precondition(
            Reason.STEP_CLOSED,
            f"step {step_id!r} {over}: attempt {attempt}'s frames are refused; stop the attempt",
        )


def _frame(row: Row) -> wf.StreamFrame:
    frame = wf.StreamFrame(
        seq=row["seq"],
        stream=row["stream"],
        step_id=row["step_id"],
        attempt=row["attempt"],
        kind=wf.FRAME_KIND_DATA if row["kind"] == "DATA" else wf.FRAME_KIND_RESET,
        time=timestamp(row["created_at"]),
    )
    if row["data"] is not None:
        frame.data.encoding = row["encoding"]
        frame.data.data = bytes(row["data"])
    return frame
