"""EmitFrames' one statement on a real PostgreSQL (migration 0020): a refused emit writes
nothing, not even its stream's head, and concurrent sends of one batch store it once."""

from __future__ import annotations

import asyncio

from perdure.common.payload import json_payload
from perdure.common.reasons import Reason
from perdure.history.model import EventType, StepRecord
from tests.integration.journal_db import Db, call, db, journal_dsn, refusal, started

__all__ = ["db", "journal_dsn"]  # the fixtures

HEADS = "SELECT stream, last_seq FROM history.stream_heads WHERE run_id = %s ORDER BY stream"


async def test_a_refused_emit_writes_nothing_and_a_batch_sent_at_once_twice_is_stored_once(
    db: Db,
) -> None:
    lease = await started(db.journal)
    attempt = StepRecord(EventType.STEP_ATTEMPT_STARTED, positioned=False, attempt=1)
    await db.journal.record(call(lease, 0), attempt)
    run_id = (await db.journal.find_run(lease.workflow_id, ""))["run_id"]

    gap = await refusal(db.journal.emit(lease, "step-0", 1, "new", 3, [json_payload("1")]))
    assert gap.reason == Reason.INVALID_REQUEST
    later = StepRecord(EventType.STEP_ATTEMPT_STARTED, positioned=False, attempt=2)
    await db.journal.record(call(lease, 0), later)
    over = await refusal(db.journal.emit(lease, "step-0", 1, "newer", 0, [json_payload("1")]))
    assert over.reason == Reason.STEP_CLOSED
    async with db.pool.connection() as conn:
        assert await (await conn.execute(HEADS, [run_id])).fetchall() == []

    # The same batch sent twice at once (a retry racing its first send): one waits for the
    # other's head lock, then finds the chunks stored.
    chunks = [json_payload(f'"{n}"') for n in range(5)]
    sent = await asyncio.gather(
        *(db.journal.emit(lease, "step-0", 2, "output", 0, chunks) for _ in range(2))
    )
    assert [emitted.last_seq for emitted in sent] == [5, 5]
    _, frames = await db.journal.frames_page(run_id, "output", 0)
    assert [frame.seq for frame in frames] == [1, 2, 3, 4, 5]
