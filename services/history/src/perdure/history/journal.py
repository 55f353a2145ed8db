"""The journal's rules: fence-checked writes, idempotent starts, reads with paging."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors
from perdure.history import convert, store
from perdure.history.store import Row

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100
CLOSED_STATUS = {"result": "COMPLETED", "failure": "FAILED", "park": "PARKED"}


def encode_page_token(position: int) -> str:
    """An opaque token for the page after `position`."""
    return base64.urlsafe_b64encode(f"p:{position}".encode()).decode()


def decode_page_token(token: str) -> int | None:
    """The position a page token points after; None for the first page."""
    if not token:
        return None
    try:
        prefix, _, number = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if prefix != "p" or not (number.isascii() and number.isdigit()):
            raise ValueError(token)
        return int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise errors.invalid_argument(
            "page_token is not a token this service issued; pass next_page_token unchanged",
            reason="INVALID_PAGE_TOKEN",
        ) from None


def page_size(requested: int) -> int:
    """The page size to use for a request (0 means the default)."""
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


class Journal:
    """Every read and write of the history schema goes through here."""

    def __init__(self, pool: AsyncConnectionPool, on_scheduled: Callable[[], None]) -> None:
        self._pool = pool
        self._on_scheduled = on_scheduled  # wakes the outbox relay after a commit

    async def start(
        self, workflow_id: str, workflow_type: str, task_queue: str, input_value: Any
    ) -> tuple[bool, str]:
        """Create the run and schedule it; an identical earlier start returns it unchanged."""
        async with self._pool.connection() as conn:
            row = await store.fetch_one(
                conn,
                store.START_WORKFLOW,
                {
                    "workflow_id": workflow_id,
                    "workflow_type": workflow_type,
                    "task_queue": task_queue,
                    "input": Jsonb(input_value),
                },
            )
        if row is not None:
            self._on_scheduled()
            return True, "RUNNING"
        async with self._pool.connection() as conn:
            existing = await store.fetch_one(conn, store.SELECT_WORKFLOW, [workflow_id])
        assert existing is not None  # runs are never deleted
        mismatch = [
            name
            for name, asked, stored in (
                ("workflow_type", workflow_type, existing["workflow_type"]),
                ("task_queue", task_queue, existing["task_queue"]),
                ("input", input_value, existing["input"]),
            )
            if asked != stored
        ]
        if mismatch:
            raise errors.already_exists(
                "WORKFLOW_ID_CONFLICT",
                f"workflow id {workflow_id!r} is already used by a run with a different "
                f"{', '.join(mismatch)}; choose another id or repeat the original request",
            )
        return False, str(existing["status"])

    async def describe(self, workflow_id: str) -> tuple[wf.WorkflowInfo, list[wf.StepInfo]]:
        """The run and its recorded steps in call order."""
        async with self._pool.connection() as conn:
            row = await self._require(conn, workflow_id)
            steps = await store.fetch_all(conn, store.SELECT_STEP_EVENTS, [workflow_id])
        return convert.workflow_info(row), [convert.step_info(step) for step in steps]

    async def history_page(
        self, workflow_id: str, requested_size: int, token: str
    ) -> tuple[list[wf.HistoryEvent], str]:
        """One page of events and the token of the next (empty at the end)."""
        after = decode_page_token(token) or 0
        size = page_size(requested_size)
        async with self._pool.connection() as conn:
            await self._require(conn, workflow_id)
            rows = await store.fetch_all(
                conn,
                store.SELECT_EVENTS,
                {"workflow_id": workflow_id, "after": after, "limit": size + 1},
            )
        more = len(rows) > size
        rows = rows[:size]
        next_token = encode_page_token(rows[-1]["event_id"]) if more else ""
        return [convert.history_event(row) for row in rows], next_token

    async def list_page(
        self, status: str | None, workflow_type: str | None, requested_size: int, token: str
    ) -> tuple[list[wf.WorkflowInfo], str]:
        """One page of runs, newest first, and the token of the next."""
        before = decode_page_token(token)
        size = page_size(requested_size)
        async with self._pool.connection() as conn:
            rows = await store.fetch_all(
                conn,
                store.LIST_WORKFLOWS,
                {
                    "status": status,
                    "workflow_type": workflow_type,
                    "before": before,
                    "limit": size + 1,
                },
            )
        more = len(rows) > size
        rows = rows[:size]
        next_token = encode_page_token(rows[-1]["run_seq"]) if more else ""
        return [convert.workflow_info(row) for row in rows], next_token

    async def load(
        self, workflow_id: str, fence: int
    ) -> tuple[wf.WorkflowInfo, list[wf.HistoryEvent]]:
        """Raise the fence mark to `fence` and return the run with its whole journal.

        The mark is committed before the read: from then on every earlier holder is fenced out.
        """
        async with self._pool.connection() as conn:
            row = await store.fetch_one(
                conn, store.ADVANCE_FENCE, {"workflow_id": workflow_id, "fence": fence}
            )
            if row is None:
                raise await self._rejection(conn, workflow_id, fence)
            events = await store.fetch_all(
                conn, store.SELECT_EVENTS, {"workflow_id": workflow_id, "after": 0, "limit": None}
            )
        return convert.workflow_info(row), [convert.history_event(event) for event in events]

    async def record_step(
        self,
        workflow_id: str,
        fence: int,
        step_id: str,
        step_name: str,
        position: int,
        attempt: int,
        output: Any,
        failure: wf.Failure | None,
    ) -> int:
        """Append a step's outcome under the fence; the same outcome twice is a no-op."""
        outcome: dict[str, Any] = {
            "event_type": "STEP_FAILED" if failure is not None else "STEP_COMPLETED",
            "payload": output if failure is None else None,
            "failure": convert.failure_to_dict(failure) if failure is not None else None,
        }
        params = store.event_params(
            workflow_id=workflow_id,
            fence=fence,
            step_id=step_id,
            step_name=step_name,
            position=position,
            attempt=attempt,
            **outcome,
        )
        async with self._pool.connection() as conn:
            try:
                row = await store.fetch_one(conn, store.RECORD_STEP, params)
            except UniqueViolation:
                return await self._existing_step(conn, workflow_id, step_id, position, outcome)
            if row is None:
                raise await self._rejection(conn, workflow_id, fence)
        return int(row["event_id"])

    async def finish(self, workflow_id: str, fence: int, outcome: str, value: Any) -> str:
        """Close the run as completed ("result"), failed ("failure") or parked ("park")."""
        status = CLOSED_STATUS[outcome]
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=f"WORKFLOW_{status}",  # only WORKFLOW_COMPLETED keeps the payload
            fence=fence,
            payload=value if outcome == "result" else None,
            failure=convert.failure_to_dict(value) if outcome != "result" else None,
        )
        params["status"] = status
        async with self._pool.connection() as conn:
            if await store.fetch_one(conn, store.CLOSE_RUN, params) is not None:
                return status
            current = await self._require(conn, workflow_id)
            if current["status"] == status and current["fence"] == fence:
                return status  # a retried call whose first attempt committed
            raise await self._rejection(conn, workflow_id, fence)

    async def _existing_step(
        self,
        conn: AsyncConnection,
        workflow_id: str,
        step_id: str,
        position: int,
        outcome: dict[str, Any],
    ) -> int:
        """The event id of an identical recorded outcome (a retried call), else STEP_CONFLICT."""
        row = await store.fetch_one(
            conn,
            store.SELECT_STEP_EVENT,
            {"workflow_id": workflow_id, "step_id": step_id, "position": position},
        )
        if (
            row is not None
            and (row["step_id"], row["position"]) == (step_id, position)
            and all(row[column] == value for column, value in outcome.items())
        ):
            return int(row["event_id"])
        raise errors.failed_precondition(
            "STEP_CONFLICT",
            f"workflow {workflow_id!r} already recorded a different outcome for step {step_id!r} "
            f"or position {position}; replay the journal instead of re-running the step",
        )

    async def _require(self, conn: AsyncConnection, workflow_id: str) -> Row:
        row = await store.fetch_one(conn, store.SELECT_WORKFLOW, [workflow_id])
        if row is None:
            raise errors.not_found("WORKFLOW_NOT_FOUND", f"no workflow with id {workflow_id!r}")
        return row

    async def _rejection(
        self, conn: AsyncConnection, workflow_id: str, fence: int
    ) -> errors.ApiError:
        """Why a fenced write matched no row: unknown run, stale fence or closed run."""
        row = await self._require(conn, workflow_id)
        if row["fence"] > fence:
            return errors.failed_precondition(
                "STALE_FENCE",
                f"stale fence {fence} for workflow {workflow_id!r}: a newer lease (fence "
                f"{row['fence']}) owns it; stop working on it",
            )
        return errors.failed_precondition(
            "WORKFLOW_CLOSED", f"workflow {workflow_id!r} is already {row['status'].lower()}"
        )
