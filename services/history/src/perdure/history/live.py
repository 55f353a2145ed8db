"""What watchers read (watch_api.py): a run found once by its chain and then followed by its run
id (its key changes when the chain goes on and the run is archived), and a consistent view of
its summary and its next events."""

from __future__ import annotations

from dataclasses import dataclass

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, limits
from perdure.common.reasons import Reason
from perdure.history import convert, fencing, store
from perdure.history.appends import JournalBase
from perdure.history.model import OPEN_STATUSES
from perdure.history.reads import MAX_PAGE_SIZE
from perdure.history.rows import Row, fetch_all, fetch_one

# A run's summary and its current key, by its chain (the latest run) or by its run id.
_RUN = f"SELECT {store.WORKFLOW_COLUMNS}, workflow_id AS run_key FROM history.workflows"
_LATEST = _RUN + " WHERE workflow_id = %s"
_OF_CHAIN = _RUN + " WHERE chain_id = %s AND run_id = %s"
_BY_RUN_ID = _RUN + " WHERE run_id = %s"


@dataclass(frozen=True)
class RunView:
    """A run as one snapshot shows it: its summary and key, and its events after a cursor."""

    row: Row
    events: list[wf.HistoryEvent]
    more: bool  # events after these were committed already

    @property
    def info(self) -> wf.WorkflowInfo:
        return convert.workflow_info(self.row)

    @property
    def key(self) -> str:
        return str(self.row["run_key"])

    @property
    def closed(self) -> bool:
        return is_closed(self.row)


def is_closed(row: Row) -> bool:
    """Closed for watchers and results: no longer running or waiting (parked included)."""
    return row["status"] not in OPEN_STATUSES


class LiveReads(JournalBase):
    """Reads of the runs watchers follow."""

    async def find_run(self, workflow_id: str, run_id: str) -> Row:
        """The run `run_id` of the workflow id's chain, or its latest run without one."""
        async with self._pool.connection() as conn:
            if run_id:
                row = await fetch_one(conn, _OF_CHAIN, [workflow_id, run_id])
            else:
                row = await fetch_one(conn, _LATEST, [workflow_id])
        if row is not None:
            return row
        if run_id:
            raise errors.not_found(
                Reason.RUN_NOT_FOUND,
                f"workflow {workflow_id!r} has no run {run_id[:100]!r}: name a run id its "
                "describe or history showed (run_id, previous_run_id, next_run_id)",
            )
        raise fencing.run_not_found(workflow_id)

    async def run_by_id(self, run_id: str) -> Row:
        """A run found before (runs are never deleted)."""
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, _BY_RUN_ID, [run_id])
        if row is None:
            raise errors.not_found(Reason.RUN_NOT_FOUND, f"run {run_id!r} is gone")
        return row

    async def view(self, run_id: str, after_event_id: int) -> RunView:
        """The run and a page of its events after `after_event_id`, in one snapshot: a closed
        run's view holds its last events."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = await fetch_one(conn, _BY_RUN_ID, [run_id])
            if row is None:
                raise errors.not_found(Reason.RUN_NOT_FOUND, f"run {run_id!r} is gone")
            params = {
                "workflow_id": row["run_key"],
                "after": after_event_id,
                "rows": MAX_PAGE_SIZE,
                "budget": limits.HISTORY_PAGE_BYTES,
            }
            rows = await fetch_all(conn, store.SELECT_EVENTS, params)
        more = bool(rows) and rows[0]["candidates"] > len(rows)
        return RunView(row, [convert.history_event(event) for event in rows], more)
