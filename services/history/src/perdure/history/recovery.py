"""Resume, reset and fork: an operator's ways to get a run going again once its code changed.

- Resume: a PARKED run opens again, the same run with the same journal plus WORKFLOW_RESUMED;
  the next worker replays it from the start with the code it runs now.
- Reset: the workflow id's next run (chains.py), whose journal is a copy of one of its runs'
  events before a point (a step's first event, or an event id): the steps before it are not
  run again, the step and everything after it are. The latest run, if open, is terminated;
  the signals received after the point are carried into the new run, unconsumed.
- Fork: a first run under a new workflow id, its journal a copy up to a point (by default all
  of it but its close), with the recorded outputs of some steps replaced. The source is not
  changed.

A copy keeps every event as it was (its id, time, fence and payload: one stored by content is
referenced by its digest, never stored twice) and the consumptions of the signals it copies
that happened in it. A remote step scheduled in the copied part and closed after it is
scheduled again (its step task copied, open, one fence above, so no lease of the source's
reaches it). Each is one transaction, audited in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common import errors, namespaces
from perdure.common.reasons import Reason
from perdure.history import chains, fencing, keys, store
from perdure.history.chains import Chains
from perdure.history.children import FAIL_UNFORKED_CHILDREN, adopt_children
from perdure.history.metrics import count_closed, count_started, timed_write
from perdure.history.model import OPEN_STATUSES, EventType, RunStatus
from perdure.history.rows import Row, fetch_all, fetch_one, payload_in

# The scheduler's wake reason that opens a resumed run's retired task again (its REOPEN).
REOPEN = "resume"

# The run a copy is made from, by its key.
SELECT_SOURCE = """
SELECT workflow_id, chain_id, run_id, status, workflow_type, task_queue, input, input_encoding,
       event_count, flow
FROM history.workflows WHERE workflow_id = %s
"""

# The first event of a step in a run's journal (NULL: the step is not in it).
SELECT_STEP_START = """
SELECT min(event_id) AS event_id FROM history.events WHERE workflow_id = %s AND step_id = %s
"""

# Of the step ids asked, those with a recorded output up to an event: the steps an override
# may replace.
SELECT_COMPLETED = """
SELECT DISTINCT step_id FROM history.events
WHERE workflow_id = %(source)s AND event_id <= %(last)s AND event_type = 'STEP_COMPLETED'
  AND step_id = ANY(%(step_ids)s::text[])
"""

# The events of the source run after WORKFLOW_STARTED up to %(last)s, appended to the new run
# (which START_WORKFLOW gave its own WORKFLOW_STARTED), each step output an override names
# replaced (a large one stored by content), and the new run's counts, bytes, cancel request
# and origin set from them.
COPY_EVENTS = f"""
WITH target AS (
    SELECT part FROM history.workflows WHERE workflow_id = %(workflow_id)s
), overrides AS (
    SELECT * FROM unnest(%(override_steps)s::text[], %(override_data)s::bytea[],
                         %(override_encodings)s::text[], %(override_sha256)s::bytea[])
        AS o(step_id, data, encoding, sha256)
), source AS (
    SELECT e.*, o.step_id IS NOT NULL AS overridden, o.data AS o_data, o.encoding AS o_encoding,
           o.sha256 AS o_sha256
    FROM history.events e
    LEFT JOIN overrides o ON o.step_id = e.step_id AND e.event_type = 'STEP_COMPLETED'
    WHERE e.workflow_id = %(source_key)s AND e.event_id BETWEEN 2 AND %(last)s
), inserted AS (
    INSERT INTO history.events (workflow_id, event_id, event_type, fence, step_id, step_name,
                                position, attempt, payload, payload_encoding, payload_sha256,
                                failure, created_at, due_at, name, signal_id, consumed,
                                started_at, wait, trace_context, task_queue, child_workflow_id,
                                child_run_id, usage, part)
    SELECT %(workflow_id)s, event_id, event_type, fence, step_id, step_name, position, attempt,
           CASE WHEN NOT overridden THEN payload WHEN o_sha256 IS NULL THEN o_data END,
           CASE WHEN overridden THEN o_encoding ELSE payload_encoding END,
           CASE WHEN overridden THEN o_sha256 ELSE payload_sha256 END,
           failure, created_at, due_at, name, signal_id, consumed, started_at, wait,
           trace_context, task_queue, child_workflow_id, child_run_id,
           CASE WHEN NOT overridden THEN usage END, (SELECT part FROM target)
    FROM source
    RETURNING event_id
), stored AS (
    INSERT INTO history.payloads (sha256, data, first_part, last_part)
    SELECT DISTINCT ON (sha256) sha256, data, (SELECT part FROM target), (SELECT part FROM target)
    FROM overrides WHERE sha256 IS NOT NULL
    {store.PAYLOAD_REFERENCED}
), referenced AS (  -- the copies keep the payloads they name as long as the new run
    UPDATE history.payloads p
    SET first_part = LEAST(p.first_part, target.part),
        last_part = GREATEST(p.last_part, target.part)
    FROM target
    WHERE p.sha256 IN (SELECT payload_sha256 FROM source
                       WHERE NOT overridden AND payload_sha256 IS NOT NULL)
      AND (p.first_part > target.part OR p.last_part < target.part)
      AND p.sha256 NOT IN (SELECT sha256 FROM overrides WHERE sha256 IS NOT NULL)
)
UPDATE history.workflows SET
    event_count = event_count + (SELECT count(*) FROM inserted),
    history_bytes = history_bytes + (
        SELECT COALESCE(sum({store.EVENT_BYTES} + COALESCE(octet_length(failure::text), 0)
            + CASE WHEN overridden THEN octet_length(o_data)
                   ELSE COALESCE(octet_length(payload), (SELECT octet_length(p.data)
                        FROM history.payloads p WHERE p.sha256 = source.payload_sha256), 0)
              END), 0)
        FROM source),
    cancel_requested = EXISTS (SELECT FROM source WHERE event_type = 'CANCEL_REQUESTED'),
    reset_from_run_id = %(reset_from_run_id)s,
    forked_from_workflow_id = %(forked_from_workflow_id)s,
    forked_from_run_id = %(forked_from_run_id)s,
    copied_up_to_event_id = %(last)s
WHERE workflow_id = %(workflow_id)s
"""

# The consumptions of the copied signals made in the copied part: a signal consumed after it
# is pending again in the new run.
COPY_CONSUMPTIONS = """
INSERT INTO history.signal_consumptions (workflow_id, event_id, consumed_by, part)
SELECT %(workflow_id)s, c.event_id, c.consumed_by, w.part
FROM history.signal_consumptions c, history.workflows w
WHERE c.workflow_id = %(source_key)s AND c.consumed_by <= %(last)s
  AND w.workflow_id = %(workflow_id)s
"""

# The remote steps scheduled in the copied part: their step tasks, closed if their outcome is
# copied, else open one fence above the source's and scheduled again.
COPY_STEP_TASKS = """
WITH copied AS (
    INSERT INTO history.step_tasks
        (workflow_id, step_id, step_type, task_queue, input, input_encoding, retry,
         timeout_seconds, heartbeat_timeout_seconds, fence, closed)
    SELECT %(workflow_id)s, s.step_id, s.step_type, s.task_queue, s.input, s.input_encoding,
           s.retry, s.timeout_seconds, s.heartbeat_timeout_seconds, s.fence + 1,
           EXISTS (SELECT FROM history.events e
                   WHERE e.workflow_id = %(workflow_id)s AND e.step_id = s.step_id
                     AND e.position IS NULL
                     AND e.event_type IN ('STEP_COMPLETED', 'STEP_FAILED'))
    FROM history.step_tasks s
    WHERE s.workflow_id = %(source_key)s AND EXISTS (
        SELECT FROM history.events e
        WHERE e.workflow_id = %(workflow_id)s AND e.step_id = s.step_id
          AND e.event_type = 'STEP_SCHEDULED')
    RETURNING workflow_id, step_id, step_type, task_queue, closed
)
INSERT INTO history.outbox (workflow_id, workflow_type, task_queue, step_id, run_number)
SELECT c.workflow_id, c.step_type, c.task_queue, c.step_id, w.run_number
FROM copied c JOIN history.workflows w USING (workflow_id)
WHERE NOT c.closed
"""


@dataclass(frozen=True)
class Copied:
    """A run made from another's journal: its workflow id (qualified), run id, and the last
    event it copied."""

    workflow_id: str
    run_id: str
    copied_up_to_event_id: int


class Recovery(Chains):
    """Resuming a parked run, resetting a workflow id to a point of a run, forking a run."""

    async def resume(self, workflow_id: str, run_id: str, reason: str, by: str) -> str:
        """Open the parked latest run of `workflow_id` again and make it due, audited as
        `by`'s: its run id."""
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=EventType.WORKFLOW_RESUMED,
            failure={"type": "Resumed", "message": reason, "stack_trace": ""},
            wake=True,
            wake_reason=REOPEN,
        ) | store.audit_params(workflow_id, by, reason)
        async with self._pool.connection() as conn:
            if await self.run_of(workflow_id, run_id) != workflow_id:
                raise errors.failed_precondition(
                    Reason.WORKFLOW_NOT_PARKED,
                    f"run {run_id!r} of workflow {workflow_id!r} is not its latest run: only "
                    "the latest run can be resumed (reset from this one instead)",
                )
            with timed_write("workflow_resumed"):
                resumed = await fetch_one(conn, store.RESUME, params)
            row = await self._require(conn, workflow_id)
        if resumed is None:
            raise errors.failed_precondition(
                Reason.WORKFLOW_NOT_PARKED,
                f"workflow {workflow_id!r} is {row['status'].lower()}, not parked: only a "
                "parked run can be resumed",
            )
        self._on_scheduled()
        return str(row["run_id"])

    async def reset(
        self,
        workflow_id: str,
        run_id: str,
        step_id: str,
        event_id: int,
        reason: str,
        by: str,
    ) -> Copied:
        """Start the next run of `workflow_id` from a copy of its run `run_id` (empty: the
        latest) before `step_id`'s first event (or before `event_id`), terminating the latest
        run if open, audited as `by`'s."""
        new_run = chains.new_run_id()
        async with self._pool.connection() as conn, conn.transaction():
            latest = await fetch_one(conn, chains.LOCK_LATEST, [workflow_id])
            if latest is None:
                raise fencing.run_not_found(workflow_id)
            source = await self._source(conn, workflow_id, run_id)
            cut = await _cut(conn, source, step_id, event_id)
            replaced = latest["status"] in OPEN_STATUSES
            if replaced:
                await self._replace(conn, workflow_id, new_run)
            params = chains.start_params(
                workflow_id,
                source["workflow_type"],
                source["task_queue"],
                payload_in(source, "input"),
                run_id=new_run,
                flow=source["flow"],
            )
            await self._next_run(conn, latest, params, carry_signals=False)
            await _copy(conn, workflow_id, source, cut - 1, reset_from_run_id=source["run_id"])
            await adopt_children(conn, source, await _source_key(conn, source), new_run, cut - 1)
            await conn.execute(
                chains.CARRY_SIGNALS, chains.carried(workflow_id, source["run_id"], cut)
            )
            if latest["run_id"] != source["run_id"]:  # and those the replaced run left
                await conn.execute(
                    chains.CARRY_SIGNALS, chains.carried(workflow_id, latest["run_id"])
                )
            namespace, public_id = namespaces.split(workflow_id)
            details = {"reason": reason, "from_run_id": source["run_id"], "run_id": new_run}
            details |= {"step_id": step_id} if step_id else {"event_id": event_id}
            await keys.audit(conn, by, namespace, "WORKFLOW_RESET", public_id, details)
        self._on_scheduled()
        if replaced:
            count_closed(latest["workflow_type"], RunStatus.TERMINATED)
        count_started(source["workflow_type"])
        return Copied(workflow_id, new_run, cut - 1)

    async def fork(
        self,
        workflow_id: str,
        run_id: str,
        new_workflow_id: str,
        step_id: str,
        overrides: dict[str, Payload],
        reason: str,
        by: str,
    ) -> Copied:
        """Start a run under `new_workflow_id` from a copy of the run `run_id` of `workflow_id`
        (empty: the latest) before `step_id`'s first event (empty: all of it but its close),
        with the outputs of the steps `overrides` names replaced, audited as `by`'s."""
        new_run = chains.new_run_id()
        async with self._pool.connection() as conn, conn.transaction():
            source = await self._source(conn, workflow_id, run_id)
            cut = await _cut(conn, source, step_id, 0)
            await _require_completed(conn, source, cut - 1, overrides)
            params = chains.start_params(
                new_workflow_id,
                source["workflow_type"],
                source["task_queue"],
                payload_in(source, "input"),
                run_id=new_run,
                flow=source["flow"],
            )
            if await fetch_one(conn, store.START_WORKFLOW, params) is None:
                raise errors.already_exists(
                    Reason.WORKFLOW_ID_CONFLICT,
                    f"workflow id {namespaces.split(new_workflow_id)[1]!r} is taken: a fork "
                    "needs a workflow id no run has; choose another",
                )
            await _copy(
                conn,
                new_workflow_id,
                source,
                cut - 1,
                forked_from=(namespaces.split(workflow_id)[1], source["run_id"]),
                overrides=overrides,
            )
            await conn.execute(FAIL_UNFORKED_CHILDREN, {"workflow_id": new_workflow_id})
            namespace, public_id = namespaces.split(workflow_id)
            details = {
                "reason": reason,
                "from_run_id": source["run_id"],
                "workflow_id": namespaces.split(new_workflow_id)[1],
                "run_id": new_run,
                "step_id": step_id,
                "overrides": sorted(overrides),
            }
            await keys.audit(conn, by, namespace, "WORKFLOW_FORKED", public_id, details)
        self._on_scheduled()
        count_started(source["workflow_type"])
        return Copied(new_workflow_id, new_run, cut - 1)

    async def _source(self, conn: AsyncConnection, workflow_id: str, run_id: str) -> Row:
        """The run a copy is made from: `run_id` of the workflow id's chain (empty: its
        latest)."""
        source = await fetch_one(conn, SELECT_SOURCE, [await self.run_of(workflow_id, run_id)])
        if source is None:
            raise fencing.run_not_found(workflow_id)
        return source

    async def _replace(self, conn: AsyncConnection, workflow_id: str, new_run: str) -> None:
        """Terminate the open latest run a reset replaces."""
        message = f"reset to run {new_run}"
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=EventType.WORKFLOW_TERMINATED,
            failure={"type": "Terminated", "message": message, "stack_trace": ""},
        )
        await conn.execute(store.TERMINATE_REPLACED, params)


async def _cut(conn: AsyncConnection, source: Row, step_id: str, event_id: int) -> int:
    """The first event of `source` a copy leaves out: `step_id`'s first, or `event_id`, or
    (neither given) the run's close (the end of its journal if it is open)."""
    run = f"run {source['run_id']} of workflow {namespaces.split(source['chain_id'])[1]!r}"
    if step_id:
        row = await fetch_one(conn, SELECT_STEP_START, [source["workflow_id"], step_id])
        if row is None or row["event_id"] is None:
            raise errors.invalid_argument(
                f"{run} has no step {step_id[:200]!r} in its journal: name a step id its "
                "describe or history shows",
                Reason.STEP_NOT_IN_JOURNAL,
            )
        return int(row["event_id"])
    last = source["event_count"]
    if event_id:
        if not 2 <= event_id <= last:
            raise errors.invalid_argument(
                f"{run} has events 1 to {last}, not {event_id}: event_id must be between 2 "
                f"and {last} (WORKFLOW_STARTED is always kept)",
                Reason.STEP_NOT_IN_JOURNAL,
            )
        return event_id
    return int(last) + 1 if source["status"] in OPEN_STATUSES else int(last)


async def _require_completed(
    conn: AsyncConnection, source: Row, last: int, overrides: dict[str, Payload]
) -> None:
    """Each override must name a step with a recorded output in the copied part."""
    if not overrides:
        return
    params = {"source": source["workflow_id"], "last": last, "step_ids": sorted(overrides)}
    completed = {row["step_id"] for row in await fetch_all(conn, SELECT_COMPLETED, params)}
    missing = [step for step in sorted(overrides) if step not in completed]
    if missing:
        raise errors.invalid_argument(
            f"overrides name {', '.join(repr(m[:200]) for m in missing)}, with no recorded "
            f"output in the copied part of the journal (events 1 to {last}): override only "
            "steps that completed before the fork's step",
            Reason.STEP_NOT_IN_JOURNAL,
        )


async def _source_key(conn: AsyncConnection, source: Row) -> str:
    """The key of the source run as it is in this transaction (a reset has just archived the
    run it replaced)."""
    key = await fetch_one(conn, chains.SELECT_RUN_KEY, [source["chain_id"], source["run_id"]])
    assert key is not None  # the caller holds the chain's lock, or the source is not its latest
    return str(key["workflow_id"])


async def _copy(
    conn: AsyncConnection,
    workflow_id: str,
    source: Row,
    last: int,
    *,
    reset_from_run_id: str | None = None,
    forked_from: tuple[str, str] | None = None,
    overrides: dict[str, Payload] | None = None,
) -> None:
    """Copy events 2 to `last` of `source` into the new run `workflow_id`, with the
    consumptions and remote steps that go with them. The source is read by its key as it is
    in this transaction (a reset has just archived the run it replaced)."""
    replaced = sorted((overrides or {}).items())
    params: dict[str, Any] = {
        "workflow_id": workflow_id,
        "source_key": await _source_key(conn, source),
        "last": last,
        "override_steps": [step for step, _ in replaced],
        "override_data": [payload.data for _, payload in replaced],
        "override_encodings": [payload.encoding for _, payload in replaced],
        "override_sha256": [store.by_content(payload) for _, payload in replaced],
        "reset_from_run_id": reset_from_run_id,
        "forked_from_workflow_id": forked_from[0] if forked_from else None,
        "forked_from_run_id": forked_from[1] if forked_from else None,
    }
    for statement in (COPY_EVENTS, COPY_CONSUMPTIONS, COPY_STEP_TASKS):
        await conn.execute(statement, params)
