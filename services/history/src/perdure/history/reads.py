"""Reading runs from outside: a published value, a run's description, its history and the
list of runs, a page at a time within the page limits."""

from __future__ import annotations

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import errors, limits
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.common.reasons import Reason
from perdure.history import convert, store
from perdure.history.appends import JournalBase
from perdure.history.children import SELECT_CHILDREN, child_info
from perdure.history.model import Described, EventType, RunStatus
from perdure.history.rows import Row, fetch_all, fetch_one, payload_in

MAX_PAGE_SIZE = 1000
PAYLOAD_FRAMING = 12  # a Payload's bytes beyond its data and encoding, at most (tags, lengths)
DEFAULT_PAGE_SIZE = 100


def page_size(requested: int) -> int:
    """The page size to use for a request (0 means the default)."""
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


class Reads(JournalBase):
    """What the public API reads."""

    async def query(self, workflow_id: str, key: str) -> Row:
        """The latest value published under `key` (columns payload and created_at)."""
        async with self._pool.connection() as conn:
            await self._require(conn, workflow_id)
            row = await fetch_one(
                conn, store.SELECT_STATE, {"workflow_id": workflow_id, "key": key}
            )
        if row is None:
            raise errors.not_found(
                Reason.STATE_NOT_FOUND,
                f"workflow {workflow_id!r} has not published a value under {key!r} "
                "(the code publishes with ctx.set_state)",
            )
        return row

    async def describe(self, workflow_id: str) -> Described:
        """The run, its steps, what it does now, its pending signals and published state."""
        async with self._pool.connection() as conn:
            row = await self._require(conn, workflow_id, store.SELECT_WORKFLOW_WITH_PROGRESS)
            events = await fetch_all(conn, store.SELECT_DESCRIBED_EVENTS, [workflow_id])
            children = await fetch_all(conn, SELECT_CHILDREN, [workflow_id])
            steps = convert.step_infos(events, convert.progress_rows(row["progress"]))
            shown = _outputs_within(steps, events, limits.DESCRIBED_OUTPUT_BYTES)
            params = {"workflow_id": workflow_id, "event_ids": list(shown)}
            for output in await fetch_all(conn, store.SELECT_OUTPUTS, params):
                shown[output["event_id"]].output.CopyFrom(payload_in(output, "payload"))
        return Described(
            info=convert.workflow_info(row),
            steps=steps,
            current_step=convert.current_step(row, steps),
            pending_signals=convert.pending_signals(events),
            state=convert.published_state(events),
            flow=row["flow"],
            children=[child_info(child) for child in children],
        )

    async def history_page(
        self, workflow_id: str, requested_size: int, token: str, after_event_id: int = 0
    ) -> tuple[list[wf.HistoryEvent], str]:
        """One page of events (after `after_event_id` when there is no token), its payloads
        inline and its bytes within the page limit, and the token of the next (empty at the
        end)."""
        after = decode_page_token(token) if token else after_event_id
        params = {
            "workflow_id": workflow_id,
            "after": after,
            "rows": page_size(requested_size),
            "budget": limits.HISTORY_PAGE_BYTES,
        }
        async with self._pool.connection() as conn:
            await self._require(conn, workflow_id)
            rows = await fetch_all(conn, store.SELECT_EVENTS, params)
        more = bool(rows) and rows[0]["candidates"] > len(rows)
        next_token = encode_page_token(rows[-1]["event_id"]) if more else ""
        return [convert.history_event(row) for row in rows], next_token

    async def list_page(
        self,
        namespace: str,
        status: RunStatus | None,
        workflow_type: str | None,
        requested_size: int,
        token: str,
        id_prefix: str | None = None,
        stuck: bool = False,
        parent_workflow_id: str | None = None,
    ) -> tuple[list[wf.WorkflowInfo], str]:
        """One page of runs (whose qualified id starts with `id_prefix`, if given; only stuck
        ones if `stuck`; only the children of `parent_workflow_id`, qualified, if given),
        newest first, and the token of the next."""
        before = decode_page_token(token)
        size = page_size(requested_size)
        async with self._pool.connection() as conn:
            rows = await fetch_all(
                conn,
                store.LIST_WORKFLOWS,
                {
                    "namespace": namespace,
                    "status": None if status is None else str(status),
                    "workflow_type": workflow_type,
                    "id_prefix": id_prefix,
                    "stuck": stuck,
                    "parent_workflow_id": parent_workflow_id,
                    "before": before,
                    "limit": size + 1,
                },
            )
        more = len(rows) > size
        rows = rows[:size]
        next_token = encode_page_token(rows[-1]["run_seq"]) if more else ""
        return [convert.workflow_info(row) for row in rows], next_token


def _outputs_within(
    steps: list[wf.StepInfo], events: list[Row], budget: int
) -> dict[int, wf.StepInfo]:
    """The completed steps whose outputs the description shows, by the event that holds each:
    in step order, each that fits in what is left of `budget` bytes (judged by the sizes alone,
    before any output is read); the others are marked left out."""
    outputs = {
        row["step_id"]: row for row in events if row["event_type"] == EventType.STEP_COMPLETED
    }
    shown: dict[int, wf.StepInfo] = {}
    for step in steps:
        row = outputs.get(step.step_id)
        if step.status != wf.STEP_STATUS_COMPLETED or row is None:
            continue
        size = (row["payload_size"] or 0) + len(row["payload_encoding"] or "") + PAYLOAD_FRAMING
        step.ClearField("output")
        if size > budget:
            step.output_omitted = True
        else:
            budget -= size
            shown[row["event_id"]] = step
    return shown
