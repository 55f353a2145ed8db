"""Group commit of workers' records: the records that arrive while one batch is being written
go together in the next, as one statement and one commit.

There is no waiting window: a record arriving at an idle journal is written at once, alone.
Under load, a batch is as large as what arrived during the previous write, so each record
costs a fraction of a round trip and of a commit.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.common.replication import UnconfirmedCommit
from perdure.history import store
from perdure.history.rows import Row, fetch_all

log = logging.getLogger(__name__)

MAX_BATCH = 200


@dataclass(eq=False)
class _Record:
    params: dict[str, Any]
    result: asyncio.Future[Row | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommit:
    """Appends records (store.event_params's) in batches, one batch at a time."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self._queue: list[_Record] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, params: dict[str, Any]) -> Row | None:
        """Append one record; return RECORD_EVENTS's row, or None when its run matched no
        update (a stale fence, a closed run). Raises what writing it alone would raise."""
        record = _Record(params)
        self._queue.append(record)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        return await record.result

    async def _write_queued(self) -> None:
        while self._queue:
            batch = self._take()
            try:
                await self._write(batch)
            except Exception as error:  # a failure of the writer itself, not of a record
                for record in batch:
                    _settle(record, error=error)

    def _take(self) -> list[_Record]:
        """The next batch: the first MAX_BATCH records, in arrival order (a run's records are
        appended in that order, in one statement)."""
        batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
        return batch

    async def _write(self, batch: list[_Record]) -> None:
        try:
            rows = await self._write_together(batch)
        except Exception as error:
            if len(batch) == 1:
                _settle(batch[0], error=error)
                return
            if not isinstance(error, psycopg.Error) or isinstance(error, UnconfirmedCommit):
                # Not a record's doing; and a batch the primary committed must not be written
                # again: each caller gets the error and retries its own call.
                raise
            # One record's conflict (a retried call) or a deadlock with another replica's
            # batch undoes them all: write each half together again, so only the failing
            # record ends up alone and gets its own error (about 2 log2(n) statements, not n).
            log.debug("group commit of %d records failed (%s); halving it", len(batch), error)
            middle = len(batch) // 2
            await self._write(batch[:middle])
            await self._write(batch[middle:])
        else:
            for index, record in enumerate(batch, start=1):
                _settle(record, rows.get(index))

    async def _write_together(self, batch: list[_Record]) -> dict[int, Row]:
        """Write a batch (of one or more) with store.RECORD_EVENTS: the one append statement of
        the workers' records."""
        columns = {
            column: [_array_element(column, r.params[column]) for r in batch]
            for column in store.RECORD_EVENTS_COLUMNS
        }
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, store.RECORD_EVENTS, columns)
        return {row["ord"]: row for row in rows}


def _settle(record: _Record, row: Row | None = None, error: Exception | None = None) -> None:
    # A caller that gave up (its call was cancelled) has cancelled its future already.
    if record.result.done():
        return
    if error is not None:
        record.result.set_exception(error)
    else:
        record.result.set_result(row)


def _array_element(column: str, value: Any) -> Any:
    # A list per row does not fit a SQL array of arrays (rows differ in length): as jsonb.
    return Jsonb(value) if column == "consumed" and value is not None else value
