"""Schedules: cron or interval specs that start runs, kept in the history schema and fired by
every history replica (schedule_firing.py runs `fire_due_schedules`).

Exactly one run per slot: a replica locks a due schedule's row (FOR UPDATE SKIP LOCKED), starts
the slot's run with the statement a start uses (START_WORKFLOW: the run, its first event and
its outbox request) and advances the row's next slot, in one transaction. A replica killed
before the commit leaves the slot due for the next one; after it, the slot is gone. The run's
workflow id is "<schedule id>-<slot, RFC 3339 UTC>", so even a second start of a slot would
return the first run. Time is the database's: `now()` decides what is due."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from psycopg import AsyncConnection

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors, namespaces
from perdure.common.convert import seconds_of, timestamp
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.common.payload import normalized
from perdure.common.reasons import Reason
from perdure.common.schedule_spec import Spec
from perdure.common.text import printable
from perdure.history import chains, store
from perdure.history.fencing import OPEN
from perdure.history.flow import run_flow_bytes
from perdure.history.lifecycle import Lifecycle
from perdure.history.metrics import count_started
from perdure.history.model import EventType
from perdure.history.rows import Row, fetch_all, fetch_one
from perdure.history.validation import execution_timeout

log = logging.getLogger(__name__)

POLICIES = {
    spb.SCHEDULE_OVERLAP_POLICY_SKIP: "SKIP",
    spb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE: "BUFFER_ONE",
    spb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL: "ALLOW_ALL",
    spb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER: "CANCEL_OTHER",
}
POLICY_VALUES = {name: value for value, name in POLICIES.items()}
RECENT_ACTIONS = 10  # shown by describe
KEPT_ACTIONS = 100  # kept per schedule; older rows are pruned as new ones come
NEXT_FIRE_TIMES = 5
DEFAULT_PAGE_SIZE = 100
FIRE_BATCH = 500  # slots one round fires at most, so a round ends

_COLUMNS = """namespace, schedule_id, seq, cron, interval_seconds, offset_seconds, action,
    overlap_policy, catchup_seconds, paused, note, next_fire, buffered_slot, last_workflow_id,
    action_count, skipped_count, missed_count, created_at, updated_at"""

INSERT_SCHEDULE = f"""
INSERT INTO history.schedules
    (namespace, schedule_id, cron, interval_seconds, offset_seconds, action, overlap_policy,
     catchup_seconds, paused, note, next_fire)
VALUES (%(namespace)s, %(schedule_id)s, %(cron)s, %(interval_seconds)s, %(offset_seconds)s,
        %(action)s, %(overlap_policy)s, %(catchup_seconds)s, %(paused)s, %(note)s,
        %(next_fire)s)
ON CONFLICT (namespace, schedule_id) DO NOTHING
RETURNING {_COLUMNS}
"""

SELECT_SCHEDULE = f"""
SELECT {_COLUMNS} FROM history.schedules WHERE namespace = %s AND schedule_id = %s
"""

LOCK_SCHEDULE = SELECT_SCHEDULE.rstrip() + " FOR UPDATE\n"

SELECT_RECENT = """
SELECT slot, workflow_id, run_id, triggered, started_at FROM history.schedule_actions
WHERE namespace = %s AND schedule_id = %s ORDER BY slot DESC LIMIT %s
"""

LIST_PAGE = f"""
SELECT {_COLUMNS} FROM history.schedules
WHERE namespace = %(namespace)s AND (%(after)s::bigint IS NULL OR seq > %(after)s)
ORDER BY seq LIMIT %(limit)s
"""

# The last action of each of a page's schedules (a list shows that one).
SELECT_LAST_ACTIONS = """
SELECT DISTINCT ON (schedule_id) schedule_id, slot, workflow_id, run_id, triggered, started_at
FROM history.schedule_actions
WHERE namespace = %s AND schedule_id = ANY(%s)
ORDER BY schedule_id, slot DESC
"""

SET_PAUSED = """
UPDATE history.schedules SET paused = %(paused)s, note = %(note)s, updated_at = now()
WHERE namespace = %(namespace)s AND schedule_id = %(schedule_id)s
RETURNING schedule_id
"""

DELETE_SCHEDULE = """
DELETE FROM history.schedules WHERE namespace = %s AND schedule_id = %s RETURNING schedule_id
"""

# The open last run of a schedule row `s`, as SQL.
_LAST_OPEN = f"""EXISTS (SELECT FROM history.workflows w
               WHERE w.workflow_id = s.last_workflow_id AND w.status IN {OPEN})"""

# One schedule with work to do, locked (other replicas skip it): a buffered slot whose wait is
# over (the last run closed), or else a slot due by the database's clock. Each by its index.
LOCK_BUFFERED = f"""
SELECT {_COLUMNS}, now() AS db_now, false AS last_open
FROM history.schedules s
WHERE s.buffered_slot IS NOT NULL AND NOT s.paused AND NOT {_LAST_OPEN}
LIMIT 1
FOR UPDATE OF s SKIP LOCKED
"""

LOCK_DUE = f"""
SELECT {_COLUMNS}, now() AS db_now, {_LAST_OPEN} AS last_open
FROM history.schedules s
WHERE s.next_fire <= now()
ORDER BY s.next_fire
LIMIT 1
FOR UPDATE OF s SKIP LOCKED
"""

# Whether any schedule has work to do (no lock): an idle look costs one statement.
ANY_DUE = f"""
SELECT EXISTS (SELECT FROM history.schedules s WHERE s.next_fire <= now())
    OR EXISTS (SELECT FROM history.schedules s
               WHERE s.buffered_slot IS NOT NULL AND NOT s.paused AND NOT {_LAST_OPEN}) AS due
"""

ADVANCE = """
UPDATE history.schedules
SET next_fire = %(next_fire)s, buffered_slot = %(buffered_slot)s,
    last_workflow_id = %(last_workflow_id)s,
    action_count = action_count + %(actions)s, skipped_count = skipped_count + %(skipped)s,
    missed_count = missed_count + %(missed)s
WHERE namespace = %(namespace)s AND schedule_id = %(schedule_id)s
"""

RECORD_ACTION = """
WITH recorded AS (
    INSERT INTO history.schedule_actions
        (namespace, schedule_id, slot, workflow_id, run_id, triggered)
    VALUES (%(namespace)s, %(schedule_id)s, %(slot)s, %(workflow_id)s, %(run_id)s, %(triggered)s)
    ON CONFLICT DO NOTHING
    RETURNING started_at
)
DELETE FROM history.schedule_actions
WHERE namespace = %(namespace)s AND schedule_id = %(schedule_id)s AND slot < (
    SELECT slot FROM history.schedule_actions
    WHERE namespace = %(namespace)s AND schedule_id = %(schedule_id)s
    ORDER BY slot DESC OFFSET %(kept)s LIMIT 1)
"""

SELECT_RUN_ID = "SELECT run_id FROM history.workflows WHERE workflow_id = %s"

DB_NOW = "SELECT now() AS now"


def slot_text(slot: datetime, *, milliseconds: bool = False) -> str:
    """A slot in RFC 3339 UTC, as it ends a run's workflow id."""
    utc = slot.astimezone(UTC).replace(tzinfo=None)
    if milliseconds:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def run_workflow_id(schedule_id: str, slot: datetime, *, triggered: bool = False) -> str:
    """The workflow id of the run a schedule starts for a slot (or a trigger at `slot`)."""
    return f"{schedule_id}-{slot_text(slot, milliseconds=triggered)}"


def spec_of(row: Row) -> Spec:
    return Spec(cron=row["cron"], interval=row["interval_seconds"], offset=row["offset_seconds"])


def spec_columns(spec: spb.ScheduleSpec) -> dict[str, Any]:
    """A validated public spec as the table's columns."""
    if spec.cron:
        return {"cron": spec.cron, "interval_seconds": None, "offset_seconds": 0}
    return {
        "cron": None,
        "interval_seconds": int(seconds_of("spec.interval", spec.interval)),
        "offset_seconds": int(seconds_of("spec.offset", spec.offset)),
    }


@dataclass(frozen=True)
class Started:
    """A run a schedule started, to count and log once committed."""

    schedule_id: str
    workflow_id: str
    workflow_type: str


def _committed(started: list[Started]) -> None:
    for run in started:
        count_started(run.workflow_type)
        log.info("schedule %s started %s", printable(run.schedule_id), printable(run.workflow_id))


@dataclass
class Advance:
    """What firing one schedule changes in its row."""

    next_fire: datetime | None
    buffered_slot: datetime | None
    last_workflow_id: str | None
    actions: int = 0
    skipped: int = 0
    missed: int = 0


class Schedules(Lifecycle):
    """Keeping schedules and firing their slots."""

    async def create_schedule(
        self, namespace: str, schedule: spb.Schedule, catchup_seconds: float
    ) -> spb.ScheduleInfo:
        """Store a validated schedule; its first slot is the first after now (database
        clock). ALREADY_EXISTS if the namespace has a schedule of that id."""
        spec_params = spec_columns(schedule.spec)
        async with self._pool.connection() as conn, conn.transaction():
            now = (await fetch_one(conn, DB_NOW, ()))["now"]  # type: ignore[index]
            params = {
                "namespace": namespace,
                "schedule_id": schedule.schedule_id,
                **spec_params,
                "action": schedule.action.SerializeToString(deterministic=True),
                "overlap_policy": POLICIES.get(schedule.overlap_policy, "SKIP"),
                "catchup_seconds": catchup_seconds,
                "paused": schedule.paused,
                "note": schedule.note,
            }
            params["next_fire"] = spec_of(params).next_slot(now)
            row = await fetch_one(conn, INSERT_SCHEDULE, params)
        if row is None:
            raise errors.already_exists(
                Reason.SCHEDULE_ID_CONFLICT,
                f"schedule {schedule.schedule_id!r} already exists in namespace "
                f"{namespace!r}: choose another id, or delete that schedule first",
            )
        return schedule_info(row, [])

    async def describe_schedule(self, namespace: str, schedule_id: str) -> spb.ScheduleInfo:
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, SELECT_SCHEDULE, [namespace, schedule_id])
            if row is None:
                raise not_found(namespace, schedule_id)
            recent = await fetch_all(conn, SELECT_RECENT, [namespace, schedule_id, RECENT_ACTIONS])
        return schedule_info(row, recent)

    async def list_schedules(
        self, namespace: str, page_size: int, page_token: str
    ) -> tuple[list[spb.ScheduleInfo], str]:
        limit = page_size or DEFAULT_PAGE_SIZE
        params = {"namespace": namespace, "after": decode_page_token(page_token), "limit": limit}
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, LIST_PAGE, params)
            ids = [row["schedule_id"] for row in rows]
            last = await fetch_all(conn, SELECT_LAST_ACTIONS, [namespace, ids])
        token = encode_page_token(rows[-1]["seq"]) if len(rows) == limit else ""
        by_id = {action["schedule_id"]: [action] for action in last}
        return [schedule_info(row, by_id.get(row["schedule_id"], [])) for row in rows], token

    async def set_paused(self, namespace: str, schedule_id: str, paused: bool, note: str) -> None:
        params = {"namespace": namespace, "schedule_id": schedule_id, "paused": paused}
        async with self._pool.connection() as conn:
            if await fetch_one(conn, SET_PAUSED, params | {"note": note}) is None:
                raise not_found(namespace, schedule_id)

    async def delete_schedule(self, namespace: str, schedule_id: str) -> None:
        """Delete a schedule and its record of actions; the runs it started stay."""
        async with self._pool.connection() as conn:
            if await fetch_one(conn, DELETE_SCHEDULE, [namespace, schedule_id]) is None:
                raise not_found(namespace, schedule_id)

    async def trigger_schedule(self, namespace: str, schedule_id: str) -> spb.ScheduleAction:
        """Start a run of the schedule's action now, whatever its policy or pause."""
        async with self._pool.connection() as conn:
            async with conn.transaction():
                row = await fetch_one(conn, LOCK_SCHEDULE, [namespace, schedule_id])
                if row is None:
                    raise not_found(namespace, schedule_id)
                now = (await fetch_one(conn, DB_NOW, ()))["now"]  # type: ignore[index]
                started: list[Started] = []
                workflow_id, run_id = await self._start_slot(
                    conn, row, now, started, triggered=True
                )
                advance = Advance(row["next_fire"], row["buffered_slot"], workflow_id, actions=1)
                await conn.execute(ADVANCE, _advance_params(row, advance))
            self._on_scheduled()
            _committed(started)
        return spb.ScheduleAction(
            slot_time=timestamp(now),
            workflow_id=namespaces.split(workflow_id)[1],
            run_id=run_id,
            start_time=timestamp(now),
            triggered=True,
        )

    async def fire_due_schedules(self) -> int:
        """Fire every slot due now, one schedule's slot per transaction; how many were
        handled (at most FIRE_BATCH a call)."""
        async with self._pool.connection() as conn:
            if not (await fetch_one(conn, ANY_DUE, ()))["due"]:  # type: ignore[index]
                return 0
        handled = 0
        while handled < FIRE_BATCH:
            started: list[Started] = []
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    row = await fetch_one(conn, LOCK_BUFFERED, ()) or await fetch_one(
                        conn, LOCK_DUE, ()
                    )
                    if row is None:
                        return handled
                    await self._fire(conn, row, started)
                self._on_scheduled()  # again, now that the runs are committed
            _committed(started)
            handled += 1
        return handled

    async def _fire(self, conn: AsyncConnection, row: Row, started: list[Started]) -> None:
        """Handle one thing a locked due schedule has to do (its caller commits): start a
        buffered slot whose wait is over, or take its next slot under the overlap policy, or
        count the slots older than its catch-up window as missed."""
        now: datetime = row["db_now"]
        spec = spec_of(row)
        advance = Advance(row["next_fire"], row["buffered_slot"], row["last_workflow_id"])
        buffered = row["buffered_slot"]
        if buffered is not None and not row["paused"] and not row["last_open"]:
            advance.last_workflow_id, _ = await self._start_slot(conn, row, buffered, started)
            advance.buffered_slot, advance.actions = None, 1
            await conn.execute(ADVANCE, _advance_params(row, advance))
            return
        slot: datetime = row["next_fire"]
        window_start = now - timedelta(seconds=row["catchup_seconds"])
        if slot < window_start:  # the slots no replica reached in time
            advance.next_fire = spec.first_slot_from(window_start)
            advance.missed = spec.count_slots(slot, window_start)
            log.warning(
                "schedule %s missed %d slots older than its catch-up window",
                printable(row["schedule_id"]),
                advance.missed,
            )
            await conn.execute(ADVANCE, _advance_params(row, advance))
            return
        advance.next_fire = spec.next_slot(slot)
        policy = row["overlap_policy"]
        if row["paused"]:
            advance.skipped = 1
        elif not row["last_open"] or policy == "ALLOW_ALL":
            advance.last_workflow_id, _ = await self._start_slot(conn, row, slot, started)
            advance.actions = 1
        elif policy == "SKIP":
            advance.skipped = 1
        elif policy == "BUFFER_ONE":
            if buffered is None:
                advance.buffered_slot = slot
            else:
                advance.skipped = 1
        else:  # CANCEL_OTHER: the open run is asked to cancel; this slot waits for its close
            await self._cancel_previous(conn, row)
            advance.skipped = int(buffered is not None)  # a newer slot replaces a waiting one
            advance.buffered_slot = slot
        await conn.execute(ADVANCE, _advance_params(row, advance))

    async def _start_slot(
        self,
        conn: AsyncConnection,
        row: Row,
        slot: datetime,
        started: list[Started],
        *,
        triggered: bool = False,
    ) -> tuple[str, str]:
        """Start the schedule's run for `slot` in the caller's transaction, as a start does:
        (its qualified workflow id, its run id), a new run added to `started` (for the caller
        to count once committed). A slot's id already taken is its run."""
        namespace = row["namespace"]
        action = api.StartWorkflowRequest.FromString(row["action"])
        workflow_id = namespaces.qualify(
            namespace, run_workflow_id(row["schedule_id"], slot, triggered=triggered)
        )
        # The fields WorkflowApi.StartWorkflow hands to a start: one added there belongs here
        # (a debounce or singleton key excepted: a schedule's overlap policy decides instead).
        params = chains.start_params(
            workflow_id,
            action.workflow_type,
            namespaces.qualify(namespace, action.task_queue),
            normalized(action.input),
            run_id=chains.new_run_id(),
            execution_timeout=execution_timeout(action),
            flow=run_flow_bytes(action.flow if action.HasField("flow") else None),
        )
        if await self._create(conn, params):
            run_id = params["run_id"]
            started.append(Started(row["schedule_id"], workflow_id, action.workflow_type))
        else:
            existing = await fetch_one(conn, SELECT_RUN_ID, [workflow_id])
            assert existing is not None  # the conflict was on this key
            run_id = existing["run_id"]
        await conn.execute(
            RECORD_ACTION,
            {
                "namespace": namespace,
                "schedule_id": row["schedule_id"],
                "slot": slot,
                "workflow_id": workflow_id,
                "run_id": run_id,
                "triggered": triggered,
                "kept": KEPT_ACTIONS,
            },
        )
        return workflow_id, run_id

    async def _cancel_previous(self, conn: AsyncConnection, row: Row) -> None:
        """Ask the schedule's open last run to cancel, as CancelWorkflow does (audited as the
        schedule's)."""
        workflow_id = row["last_workflow_id"]
        reason = f"schedule {row['schedule_id']} (overlap policy CANCEL_OTHER): a newer slot is due"
        params = store.event_params(
            workflow_id=workflow_id,
            event_type=EventType.CANCEL_REQUESTED,
            failure={"type": "CancelRequested", "message": reason, "stack_trace": ""},
            wake=True,
        ) | store.audit_params(workflow_id, f"schedule:{row['schedule_id']}", reason)
        await fetch_one(conn, store.REQUEST_CANCEL, params)  # asked already: nothing to add


def _advance_params(row: Row, advance: Advance) -> dict[str, Any]:
    return {
        "namespace": row["namespace"],
        "schedule_id": row["schedule_id"],
        "next_fire": advance.next_fire,
        "buffered_slot": advance.buffered_slot,
        "last_workflow_id": advance.last_workflow_id,
        "actions": advance.actions,
        "skipped": advance.skipped,
        "missed": advance.missed,
    }


def not_found(namespace: str, schedule_id: str) -> errors.ApiError:
    return errors.not_found(
        Reason.SCHEDULE_NOT_FOUND,
        f"namespace {namespace!r} has no schedule {schedule_id[:100]!r}: list the schedules "
        "to see their ids",
    )


def schedule_info(row: Row, recent: list[Row]) -> spb.ScheduleInfo:
    """A schedule's row (and its recent actions) as the public API shows it."""
    spec = spb.ScheduleSpec()
    if row["cron"] is not None:
        spec.cron = row["cron"]
    else:
        spec.interval.FromSeconds(row["interval_seconds"])
        spec.offset.FromSeconds(row["offset_seconds"])
    schedule = spb.Schedule(
        schedule_id=row["schedule_id"],
        spec=spec,
        action=api.StartWorkflowRequest.FromString(row["action"]),
        overlap_policy=POLICY_VALUES[row["overlap_policy"]],
        paused=row["paused"],
        note=row["note"],
    )
    schedule.catchup_window.FromMilliseconds(round(row["catchup_seconds"] * 1000))
    info = spb.ScheduleInfo(
        schedule=schedule,
        action_count=row["action_count"],
        skipped_count=row["skipped_count"],
        missed_count=row["missed_count"],
        create_time=timestamp(row["created_at"]),
        update_time=timestamp(row["updated_at"]),
        recent_actions=[
            spb.ScheduleAction(
                slot_time=timestamp(action["slot"]),
                workflow_id=namespaces.split(action["workflow_id"])[1],
                run_id=action["run_id"],
                start_time=timestamp(action["started_at"]),
                triggered=action["triggered"],
            )
            for action in recent
        ],
    )
    if row["next_fire"] is not None:
        first = row["next_fire"]
        info.next_fire_times.extend(
            _stamp(slot) for slot in [first, *spec_of(row).slots(first, NEXT_FIRE_TIMES - 1)]
        )
    if row["buffered_slot"] is not None:
        info.buffered_slot_time.CopyFrom(_stamp(row["buffered_slot"]))
    return info


def _stamp(moment: datetime) -> Timestamp:
    stamp = timestamp(moment)
    assert stamp is not None
    return stamp
