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
from perdure.history.commit_feed import ORIGIN, Handed
from perdure.history.fencing import OPEN, run_lease_held, step_lease_held
from perdure.history.model import Lease
from perdure.history.rows import Row, fetch_all, fetch_one

MAX_CHUNKS = 1000  # per EmitFrames call
PAGE_ROWS = 1000
FRAME_FRAMING = 64  # a StreamFrame's bytes beyond its data, stream and step id, at most

# The lease, under a share lock on the run's row (no append commits until the emit does), then
# the chunks stored or refused (migration 0020's emit_frames). MATERIALIZED: the lease is
# checked and its row locked before the function runs, never after.
_EMIT = """
WITH run AS MATERIALIZED ({lease})
SELECT run.run_id, run.cancel_requested, e.* FROM run, LATERAL history.emit_frames(
    run.run_id, %(workflow_id)s, %(step_id)s, %(attempt)s, %(stream)s, %(first_index)s,
    %(data)s::bytea[], %(encodings)s::text[], %(origin)s) e
"""
_EMIT_RUN = _EMIT.format(
    lease=f"""SELECT w.run_id, w.cancel_requested FROM history.workflows w
    WHERE {run_lease_held("w.")} FOR SHARE OF w"""
)
_EMIT_STEP = _EMIT.format(
    lease=f"""SELECT w.run_id, w.cancel_requested FROM history.step_tasks s
    JOIN history.workflows w USING (workflow_id)
    WHERE {step_lease_held("s.")} AND w.status IN {OPEN} FOR SHARE OF w, s"""
)
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
            "data": [chunk.data for chunk in chunks],
            "encodings": [chunk.encoding for chunk in chunks],
            "origin": ORIGIN,
        }
        async with self._pool.connection() as conn:
            try:
                row = await fetch_one(conn, _EMIT_STEP if lease.step_id else _EMIT_RUN, params)
            except BaseException:  # it may have committed: the readers here read
                self._on_committed(lease.workflow_id, False)
                raise
            if row is None:
                raise await fencing.rejection(conn, lease)
        _require_accepted(row, step_id, attempt, first_index, stream)
        if row["first_seq"] is not None:
            handed = None if row["reset"] else _handed(row, step_id, attempt, stream, chunks)
            self._on_committed(lease.workflow_id, False, handed)
        return Emitted(row["last_seq"], row["cancel_requested"])

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


def _require_accepted(
    emitted: Row, step_id: str, attempt: int, first_index: int, stream: str
) -> None:
    """Refuse frames of an attempt that is over (STEP_CLOSED: the step has its outcome, this
    attempt's failure is recorded, or a later attempt started), and chunks that skip some."""
    refused, seen = emitted["refused"], emitted["attempt_seen"]
    over = {
        "closed": "has its outcome already",
        "failed": f"recorded attempt {seen} failed",
        "started": f"started attempt {seen}",
    }.get(refused)
    if over is not None:
        raise errors.failed_precondition(
            Reason.STEP_CLOSED,
            f"step {step_id!r} {over}: attempt {attempt}'s frames are refused; stop the attempt",
        )
    if refused == "gap":
        raise errors.invalid_argument(
            f"first_index {first_index} skips chunks: attempt {attempt} of step {step_id!r} "
            f"has {emitted['stored']} stored on stream {stream!r}; send them first, in order"
        )


def _handed(
    emitted: Row, step_id: str, attempt: int, stream: str, chunks: Sequence[Payload]
) -> Handed:
    """The frames an emit stored, as readers receive them, for the readers here (Handed)."""
    first, last = emitted["first_seq"], emitted["last_seq"]
    fresh = chunks[len(chunks) - (last - first + 1) :]
    framing = FRAME_FRAMING + len(stream.encode())

    def frames() -> list[wf.StreamFrame]:
        return [
            _frame(
                {
                    "seq": seq,
                    "stream": stream,
                    "step_id": step_id,
                    "attempt": attempt,
                    "kind": "DATA",
                    "created_at": emitted["stored_at"],
                    "data": chunk.data,
                    "encoding": chunk.encoding,
                }
            )
            for seq, chunk in zip(range(first, last + 1), fresh, strict=True)
        ]

    return Handed(stream, sum(len(chunk.data) + framing for chunk in fresh), frames)


def _frame(row: Row) -> wf.StreamFrame:
    """A frame as readers receive it, from its row (or the values an emit stored)."""
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
