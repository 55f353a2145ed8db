"""The history schema's statements (their fence conditions are fencing.py's), and the
parameters of an event's append."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common import limits, namespaces
from perdure.common.payload import null_payload
from perdure.history.fencing import (
    OPEN,
    TAKE_LEASE,
    run_lease_held,
    run_lease_taken,
    step_lease_held,
    step_lease_taken,
)
from perdure.history.model import PAYLOAD_EVENTS, EventType, WaitKind
from perdure.history.rows import Row, json_or_none, payload_columns

# A run shows its chain's workflow id: an archived run's key is not a workflow id (chains.py).
WORKFLOW_COLUMNS = (
    "chain_id AS workflow_id, run_id, run_number, previous_run_id, next_run_id,"
    " workflow_type, task_queue, status, input, input_encoding, result,"
    " result_encoding, failure, fence,"
    " event_count, created_at, updated_at, closed_at, wait_kind, wait_name, wait_until,"
    " cancel_requested, trace_context, stuck_since, history_bytes, build_id,"
    " reset_from_run_id, forked_from_workflow_id, forked_from_run_id, copied_up_to_event_id,"
    " parent_workflow_id, parent_run_id, parent_close_policy"
)
_EVENT_FIELDS = (
    "event_id, event_type, fence, step_id, step_name, position, attempt,"
    " payload_encoding, failure,"
    " created_at, due_at, name, signal_id, consumed, started_at, wait, trace_context,"
    " task_queue, child_workflow_id, child_run_id, usage"
)
# A payload stored by content (payload_sha256) read back in its place: what the public API and
# the journal's own comparisons see. Needs history.events unaliased.
_PAYLOAD_VALUE = (
    "COALESCE(payload, (SELECT p.data FROM history.payloads p"
    " WHERE p.sha256 = events.payload_sha256))"
)
_INLINE_PAYLOAD = f"{_PAYLOAD_VALUE} AS payload"
EVENT_COLUMNS = f"{_EVENT_FIELDS}, {_INLINE_PAYLOAD}"
# An event as a worker loads it: a payload stored by content stays a reference (its digest and
# size), fetched with LoadPayload when the replay needs it.
JOURNAL_EVENT_COLUMNS = (
    f"{_EVENT_FIELDS}, payload, payload_sha256,"
    " (SELECT octet_length(p.data) FROM history.payloads p"
    " WHERE p.sha256 = events.payload_sha256) AS payload_size"
)
# The run's step progress (last heartbeats) as a JSON array, returned with the run so that a
# load or a describe costs no extra round trip. Needs the workflows row aliased `w`.
_PROGRESS = """(
    SELECT COALESCE(json_agg(json_build_object(
               'step_id', p.step_id, 'attempt', p.attempt,
               'details', encode(p.details, 'base64'), 'details_encoding', p.details_encoding,
               'updated_at', p.updated_at) ORDER BY p.updated_at), '[]')
    FROM history.step_progress p WHERE p.workflow_id = w.workflow_id
) AS progress"""

SELECT_WORKFLOW = f"SELECT {WORKFLOW_COLUMNS} FROM history.workflows WHERE workflow_id = %s"


def run_row(columns: Row) -> Row:
    """A workflows row with every column by its name (RETURNING *) as WORKFLOW_COLUMNS and
    live.py's run_key name them: the chain's id is the workflow id, and the row's key (its
    workflow_id column) the run key."""
    return {**columns, "workflow_id": columns["chain_id"], "run_key": columns["workflow_id"]}


# A closed run's lease and outcome: whether a FinishWorkflow sent again is the one that closed it.
SELECT_CLOSE = (
    "SELECT fence, fence_key, status, result, result_encoding, failure FROM history.workflows"
    " WHERE workflow_id = %s"
)
SELECT_WORKFLOW_WITH_PROGRESS = (
    f"SELECT {WORKFLOW_COLUMNS}, {_PROGRESS}, w.flow FROM history.workflows w"
    " WHERE workflow_id = %s"
)

# Raising the fence mark and taking the row lock happen in one statement: a lower fence
# matches no row, so a stale holder can never reach the write that follows. Only a load raises
# the mark; every other write must carry the mark itself (run_lease_held), so no fence but a loaded
# one (with authentication on: the lease the scheduler granted to the caller's key) can write.
# A waiting run being picked up is running again (it suspends anew if what it waits for is not
# there yet).
# A closed run is never loaded: its task is refused (WORKFLOW_CLOSED) and done.
# A load that finds the journal as long as the previous load left it (idle_loads): the
# previous holder recorded nothing, not even an attempt's start; the same fence loaded again
# (a retried request) is no new load. The mark before the load (previous_fence) is read under
# the row lock the update takes, so no other load can come in between.
ADVANCE_FENCE = f"""
WITH prior AS (
    SELECT fence AS previous_fence FROM history.workflows
    WHERE workflow_id = %(workflow_id)s FOR UPDATE
)
UPDATE history.workflows w
SET {TAKE_LEASE}, stuck_since = NULL,
    status = CASE WHEN status = 'WAITING' THEN 'RUNNING' ELSE status END,
    wait_kind = NULL, wait_name = NULL, wait_until = NULL,
    idle_loads = CASE WHEN fence = %(fence)s THEN idle_loads
                      WHEN event_count = loaded_event_count THEN idle_loads + 1
                      ELSE 1 END,
    loaded_event_count = event_count,
    build_id = COALESCE(w.build_id, NULLIF(%(build_id)s, ''))
FROM prior
WHERE {run_lease_taken()}
RETURNING {WORKFLOW_COLUMNS}, part, idle_loads, now() AS db_now, {_PROGRESS},
          prior.previous_fence
"""

# A later page of a load (the same fence, after the first page's events): it only reads, under
# the lease like any write, and counts as no new load.
SELECT_LOADED_RUN = f"""
SELECT {WORKFLOW_COLUMNS}, part, now() AS db_now, {_PROGRESS}, fence AS previous_fence
FROM history.workflows w WHERE {run_lease_held()}
"""

# A payload stored by content, for the lease of a run one of whose events names it: a row with
# NULL data when none does (NOT_FOUND), no row when the lease is not held.
LOAD_PAYLOAD = f"""
SELECT named.payload_encoding, p.data
FROM history.workflows w
LEFT JOIN LATERAL (
    SELECT e.payload_encoding FROM history.events e
    WHERE e.workflow_id = w.workflow_id AND e.payload_sha256 = %(sha256)s LIMIT 1
) named ON true
LEFT JOIN history.payloads p ON p.sha256 = %(sha256)s AND named.payload_encoding IS NOT NULL
WHERE {run_lease_held("w.")}
"""

# Every journal append is one statement: an UPDATE of the run (`appended`, which must return
# workflow_id, workflow_type, task_queue, event_count, cancel_requested and, for the statements
# of requests from outside the run, trace_context) reserves the next
# event id, and the INSERT of insert_event writes the event from it. When the UPDATE matches no
# row (a stale fence, a closed run) nothing is written; a step id, position or signal id already
# taken raises UniqueViolation and the whole statement, the UPDATE included, is undone.
_APPENDED_COLUMNS = (
    "workflow_id, workflow_type, task_queue, event_count, cancel_requested, run_number, part"
)

# A payload stored by content again: its range of partitions widened to the new reference's
# (retention.py collects it once no partition of the range is left); written once per
# partition, not at every reference.
PAYLOAD_REFERENCED = """ON CONFLICT (sha256) DO UPDATE
    SET first_part = LEAST(payloads.first_part, EXCLUDED.first_part),
        last_part = GREATEST(payloads.last_part, EXCLUDED.last_part)
    WHERE payloads.first_part > EXCLUDED.first_part OR payloads.last_part < EXCLUDED.last_part"""

# An event's parameters (event_params's keys) and their SQL types: the one list both the single
# appends and the batched one (RECORD_EVENTS) write from, and the
# appends spelt in SQL alone (event_values) name.
EVENT_PARAMS = {
    "workflow_id": "text",
    "fence": "bigint",
    "event_type": "text",
    "step_id": "text",
    "step_name": "text",
    "position": "bigint",
    "attempt": "int",
    "payload": "bytea",
    "payload_encoding": "text",
    "payload_sha256": "bytea",
    "failure": "jsonb",
    "due_at": "timestamptz",
    "due_in": "float8",
    "name": "text",
    "signal_id": "text",
    "consumed": "bigint[]",
    "started_at": "timestamptz",
    "wait": "jsonb",
    "trace_context": "jsonb",
    "task_queue": "text",
    "child_workflow_id": "text",
    "child_run_id": "text",
    "usage": "jsonb",
}


def insert_event(value: Callable[[str], str], source: str = "appended") -> str:
    """The INSERT of an append's event (the CTE `inserted`), `value` spelling how each of
    EVENT_PARAMS is read, `source` the rows it reads them from (`appended` among them). A
    payload with a digest (payload_sha256) is stored once by content (the CTE `stored`) and
    the event keeps only the digest."""
    v = value
    by_content = v("payload_sha256")
    return f""", inserted AS (
    INSERT INTO history.events (workflow_id, event_id, event_type, fence, step_id, step_name,
                                position, attempt, payload, payload_encoding, payload_sha256,
                                failure, due_at, name, signal_id, consumed, started_at, wait,
                                trace_context, task_queue, child_workflow_id, child_run_id,
                                usage, part)
    SELECT appended.workflow_id, appended.event_count, {v("event_type")}, {v("fence")},
           {v("step_id")}, {v("step_name")}, {v("position")}, {v("attempt")},
           CASE WHEN {by_content} IS NULL THEN {v("payload")} END,
           {v("payload_encoding")}, {by_content}, {v("failure")},
           COALESCE({v("due_at")}, now() + make_interval(secs => {v("due_in")})),
           {v("name")}, {v("signal_id")}, {v("consumed")}, {v("started_at")}, {v("wait")},
           {v("trace_context")}, {v("task_queue")}, {v("child_workflow_id")},
           {v("child_run_id")}, {v("usage")}, appended.part
    FROM {source}
    RETURNING workflow_id, event_id, due_at
), stored AS (
    INSERT INTO history.payloads (sha256, data, first_part, last_part)
    SELECT DISTINCT ON (1) {by_content}, {v("payload")},
           min(appended.part) OVER same, max(appended.part) OVER same
    FROM {source} WHERE {by_content} IS NOT NULL
    WINDOW same AS (PARTITION BY {by_content})
    {PAYLOAD_REFERENCED}
)"""


def _parameter(name: str) -> str:
    return f"%({name})s::{EVENT_PARAMS[name]}"


# What an event adds to its run's history_bytes beside its payload and failure.
EVENT_BYTES = 64


def event_size(value: Callable[[str], str] = _parameter) -> str:
    """What an event adds to its run's history_bytes: its payload (whether stored by content or
    not) and its failure, and EVENT_BYTES."""
    return (
        f"{EVENT_BYTES} + COALESCE(octet_length({value('payload')}), 0)"
        f" + COALESCE(octet_length({value('failure')}::text), 0)"
    )


def count_event(value: Callable[[str], str] = _parameter, run: str = "") -> str:
    """The SET of an append's UPDATE of its run (`run`: its alias with the dot, if any): one
    more event, and its bytes."""
    return (
        f"event_count = {run}event_count + 1,"
        f" history_bytes = {run}history_bytes + {event_size(value)}, updated_at = now()"
    )


def event_values(**values: str) -> Callable[[str], str]:
    """For insert_event, an event whose values are spelt in SQL (`values`, by parameter), the
    rest NULL: an append written by a statement of its own (a start, a load, a step task's
    record, a deadline)."""
    return lambda name: values.get(name, f"NULL::{EVENT_PARAMS[name]}")


# A start is one statement: the run, its WorkflowStarted event and its scheduling request are
# written together, or, when the id is taken, none of them. A debounced start's first task is
# due at the end of its window (start_keys.py). A run after the first of its chain
# (chains.py archived the one before) starts with its fence mark above its predecessor's.
START_WORKFLOW = (
    """
WITH appended AS (
    INSERT INTO history.workflows
        (workflow_id, chain_id, run_id, run_number, previous_run_id, request_id, fence,
         namespace, workflow_type, task_queue, status, input, input_encoding,
         event_count, history_bytes, trace_context, deadline, flow, debounce_key,
         debounce_until, singleton_key, parent_workflow_id, parent_run_id, parent_step_id,
         parent_close_policy)
    VALUES (%(workflow_id)s, %(workflow_id)s, %(run_id)s, %(run_number)s, %(previous_run_id)s,
            %(request_id)s, %(fence)s, %(namespace)s, %(workflow_type)s, %(task_queue)s,
            'RUNNING', %(input)s, %(input_encoding)s, 1, """
    + str(EVENT_BYTES)
    + """ + octet_length(%(input)s::bytea), %(trace_context)s,
            COALESCE(%(deadline)s::timestamptz,
                     now() + make_interval(secs => %(execution_timeout)s::float8)),
            %(flow)s, %(debounce_key)s,
            now() + make_interval(secs => %(debounce_window)s::float8), %(singleton_key)s,
            %(parent_workflow_id)s, %(parent_run_id)s, %(parent_step_id)s,
            %(parent_close_policy)s)
    ON CONFLICT (workflow_id) DO NOTHING
    RETURNING workflow_id, workflow_type, task_queue, input, input_encoding, event_count,
              run_number, flow, debounce_until, part
)"""
    + insert_event(
        event_values(
            event_type=f"'{EventType.WORKFLOW_STARTED}'",
            fence="0",
            payload="appended.input",
            payload_encoding="appended.input_encoding",
        )
    )
    + """, scheduled AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, run_number, run_flow, run_at)
    SELECT workflow_id, workflow_type, task_queue, run_number, flow, debounce_until
    FROM appended
)
SELECT workflow_id FROM appended
"""
)

# Wakes the run through the outbox at run_at (NULL: now), committed with the append.
_SCHEDULE = """, scheduled AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, run_at, wake_reason, run_number)
    SELECT workflow_id, workflow_type, task_queue, %(run_at)s::timestamptz, %(wake_reason)s,
           run_number
    FROM appended
    WHERE %(wake)s::boolean
)"""
_RESULT = """
SELECT inserted.event_id, inserted.due_at, appended.cancel_requested, appended.workflow_type
"""
# A request from outside the run (a signal, a cancel) links its span to the run's trace. The
# worker's records, every step of every run, do without the column.
_LINKED_RESULT = ", appended.trace_context AS workflow_trace_context"


def _append(
    update: str,
    *,
    schedule: bool = False,
    linked: bool = False,
    also: str = "",
    whole_run: bool = False,
) -> str:
    """The append statement of `update`; `also` adds writes (CTEs) that read `appended`;
    `whole_run` returns the run's updated row too, every column by its name (run_row)."""
    returning = "*" if whole_run else _APPENDED_COLUMNS + (", trace_context" if linked else "")
    result = "SELECT inserted.event_id, inserted.due_at, appended.*" if whole_run else _RESULT
    return (
        f"WITH appended AS ({update} RETURNING {returning})"
        + insert_event(_parameter)
        + (_SCHEDULE if schedule else "")
        + also
        + result
        + (_LINKED_RESULT if linked else "")
        + " FROM inserted, appended"
    )


# A worker's record of one call of the code (a step outcome, a timer, state...; a signal
# consumption is CONSUME_SIGNALS's).
_RECORD = f"""UPDATE history.workflows
    SET {count_event()}
    WHERE {run_lease_held()}"""

# A signal consumption (SIGNAL_CONSUMED, its `consumed` the SIGNAL_RECEIVED event ids it takes):
# only this run's signals, each named once and not consumed yet; the run matches no row
# otherwise, and nothing is written. Each is then marked consumed by the new event, in the same
# statement: a consumption racing for the same signal violates signal_consumptions' primary key
# and is undone whole.
CONSUME_SIGNALS = _append(
    f"""UPDATE history.workflows w
    SET {count_event()}
    WHERE {run_lease_held()}
      AND cardinality(%(consumed)s::bigint[]) = (
          SELECT count(*) FROM history.events s
          WHERE s.workflow_id = w.workflow_id AND s.event_id = ANY(%(consumed)s::bigint[])
            AND s.event_type = 'SIGNAL_RECEIVED'
            AND NOT EXISTS (
                SELECT FROM history.signal_consumptions c
                WHERE c.workflow_id = s.workflow_id AND c.event_id = s.event_id))""",
    also=""", marked AS (
    INSERT INTO history.signal_consumptions (workflow_id, event_id, consumed_by, part)
    SELECT workflow_id, unnest(%(consumed)s::bigint[]), event_count, part FROM appended
)""",
)

# The signals among `event_ids` of a run, and whether each is consumed: why a consumption of
# them was refused.
SELECT_SIGNALS_NAMED = """
SELECT s.event_id, c.consumed_by IS NOT NULL AS consumed
FROM history.events s
LEFT JOIN history.signal_consumptions c USING (workflow_id, event_id)
WHERE s.workflow_id = %(workflow_id)s AND s.event_id = ANY(%(event_ids)s::bigint[])
  AND s.event_type = 'SIGNAL_RECEIVED'
"""

# The workers' records (step outcomes, timers, state...), one or many in one statement and
# one commit (group commit): each input row is appended as _append's statements append one, a
# run's rows in their order (a step's outcome and the next attempt's start, sent together, share
# a commit). A row whose run matches no update (a stale fence, a closed run) gets no result row.
# Any error undoes the whole statement. Parameters: EVENT_PARAMS and lease_key, each an array
# with one element per record (consumed as jsonb: rows differ in length).
_BATCHED = {**EVENT_PARAMS, "consumed": "jsonb", "lease_key": "text", "unless_cancel": "bool"}
RECORD_EVENTS_COLUMNS = tuple(_BATCHED)
_BATCHED_LEASE_HELD = run_lease_held(
    "w.", workflow_id="r.workflow_id", fence="r.fence", lease_key="r.lease_key"
)


def _input(name: str) -> str:
    if name == "consumed":
        return (
            "CASE WHEN i.consumed IS NOT NULL"
            " THEN ARRAY(SELECT jsonb_array_elements_text(i.consumed)::bigint) END"
        )
    return f"i.{name}"


# Each run's rows under one lease count as one update of the run (a run's row is updated once
# per statement): its events are numbered after the run's last, in the rows' order. Rows of
# one run under another lease match no update, and neither does a row `unless_cancel` of a
# run with a cancel request.
RECORD_EVENTS = (
    f"""
WITH input AS (
    SELECT * FROM unnest({", ".join(f"%({n})s::{t}[]" for n, t in _BATCHED.items())})
        WITH ORDINALITY AS i({", ".join(_BATCHED)}, ord)
), kept AS (
    SELECT i.* FROM input i
    WHERE NOT i.unless_cancel OR NOT EXISTS (
        SELECT FROM history.workflows c
        WHERE c.workflow_id = i.workflow_id AND c.cancel_requested)
), runs AS (
    SELECT i.workflow_id, i.fence, i.lease_key, count(*) AS events,
           sum({event_size(_input)}) AS bytes
    FROM kept i GROUP BY i.workflow_id, i.fence, i.lease_key
), updated AS (
    UPDATE history.workflows w
    SET event_count = w.event_count + r.events, history_bytes = w.history_bytes + r.bytes,
        updated_at = now()
    FROM runs r
    WHERE {_BATCHED_LEASE_HELD}
    RETURNING r.workflow_id, r.fence, r.lease_key, r.events, w.workflow_type, w.event_count,
              w.cancel_requested, w.part
), appended AS (
    SELECT i.ord, u.workflow_id, u.workflow_type, u.cancel_requested, u.part,
           u.event_count - u.events
             + row_number() OVER (PARTITION BY u.workflow_id ORDER BY i.ord) AS event_count
    FROM updated u JOIN kept i USING (workflow_id, fence, lease_key)
)"""
    + insert_event(_input, source="appended JOIN input i USING (ord)")
    + """
SELECT a.ord, inserted.event_id, inserted.due_at, a.cancel_requested, a.workflow_type
FROM appended a JOIN inserted
  ON inserted.workflow_id = a.workflow_id AND inserted.event_id = a.event_count
"""
)

SUSPEND = _append(
    f"""UPDATE history.workflows
    SET {count_event()},
        status = 'WAITING', wait_kind = %(wait_kind)s, wait_name = %(wait_name)s,
        wait_until = %(run_at)s
    WHERE {run_lease_held()}""",
    schedule=True,
)

# A run that closes retires its tasks at the scheduler: it is never handed out again.
_RETIRED = """, retired AS (
    INSERT INTO history.outbox (workflow_id, workflow_type, task_queue, closed, run_number)
    SELECT workflow_id, workflow_type, task_queue, true, run_number FROM appended
)"""

_CLOSE = f"""UPDATE history.workflows
    SET {count_event()},
        status = %(status)s, result = %(payload)s, result_encoding = %(payload_encoding)s,
        failure = %(failure)s, closed_at = now(),
        wait_kind = NULL, wait_name = NULL, wait_until = NULL
    WHERE {run_lease_held()}"""
CLOSE_RUN = _append(_CLOSE, also=_RETIRED)
# The same, returning the closed run (run_row): for a caller waiting for its result here.
CLOSE_RUN_RETURNING_IT = _append(_CLOSE, also=_RETIRED, whole_run=True)

# Platform writes (fence 0 in the event) need no lease: they only require an open run.
_OPEN_RUN = f"WHERE workflow_id = %(workflow_id)s AND status IN {OPEN}"

# A signal id is received once per workflow id, across its chain of runs (a signal carried
# into the next run keeps its id): one that an earlier run received matches no row.
_CHAIN_SIGNAL = """SELECT FROM history.events e JOIN history.workflows r USING (workflow_id)
    WHERE e.signal_id = %(signal_id)s AND r.chain_id = %(workflow_id)s"""

SIGNAL = _append(
    f"""UPDATE history.workflows SET {count_event()}
    {_OPEN_RUN} AND (%(signal_id)s::text IS NULL OR NOT EXISTS ({_CHAIN_SIGNAL}))""",
    schedule=True,
    linked=True,
)

# An administrative action's row in the audit log, written in the action's own statement: the
# log holds what was done, all of it and nothing else.
_AUDITED = """, audited AS (
    INSERT INTO history.audit_log (key_id, namespace, action, target, details)
    SELECT %(audit_key)s, %(audit_namespace)s, %(event_type)s, %(audit_target)s,
           %(audit_details)s
    FROM appended
)"""

REQUEST_CANCEL = _append(
    f"""UPDATE history.workflows
    SET {count_event()}, cancel_requested = true
    {_OPEN_RUN} AND NOT cancel_requested""",
    schedule=True,
    linked=True,
    also=_AUDITED,
)

_TERMINATE_RUN = f"""UPDATE history.workflows
    SET {count_event()}, status = 'TERMINATED',
        failure = %(failure)s, closed_at = now(),
        wait_kind = NULL, wait_name = NULL, wait_until = NULL
    {_OPEN_RUN}"""

TERMINATE = _append(_TERMINATE_RUN, also=_AUDITED + _RETIRED)

# The open run a reset replaces (recovery.py, which audits the reset itself).
TERMINATE_REPLACED = _append(_TERMINATE_RUN, also=_RETIRED)

# A parked run opened again (recovery.py): running, its close and failure cleared, the
# crash-loop count started over, and made due with the scheduler's REOPEN wake reason (its
# tasks were retired when it parked), with its remote steps that have no outcome yet. A
# retirement of its tasks still in the outbox is dropped: relayed after the resume, it would
# close them again (one the relay holds is waited for, and is relayed before this).
RESUME = _append(
    f"""UPDATE history.workflows
    SET {count_event()}, status = 'RUNNING', failure = NULL, closed_at = NULL,
        idle_loads = 0, stuck_since = NULL
    WHERE workflow_id = %(workflow_id)s AND status = 'PARKED'""",
    schedule=True,
    also=_AUDITED
    + """, unretired AS (
    DELETE FROM history.outbox o USING appended
    WHERE o.workflow_id = appended.workflow_id AND o.run_number = appended.run_number
      AND o.closed
), steps_due AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, step_id, wake_reason, run_number)
    SELECT s.workflow_id, s.step_type, s.task_queue, s.step_id, %(wake_reason)s, a.run_number
    FROM history.step_tasks s JOIN appended a USING (workflow_id)
    WHERE NOT s.closed
)""",
)


def audit_params(workflow_id: str, key_id: str, reason: str) -> dict[str, Any]:
    """The audit log's columns for an action on a run by `key_id` ("" without keys)."""
    namespace, public_id = namespaces.split(workflow_id)
    return {
        "audit_key": key_id,
        "audit_namespace": namespace,
        "audit_target": public_id,
        "audit_details": Jsonb({"reason": reason}),
    }


def _heartbeat(live: str) -> str:
    """Keep a step attempt's progress if `live` (a query of workflow_id and cancel_requested)
    finds the lease good; answer whether a cancel was requested."""
    return f"""
WITH live AS ({live}), upserted AS (
    INSERT INTO history.step_progress (workflow_id, step_id, attempt, details, details_encoding)
    SELECT workflow_id, %(step_id)s, %(attempt)s, %(details)s, %(details_encoding)s FROM live
    ON CONFLICT (workflow_id, step_id) DO UPDATE
    SET attempt = EXCLUDED.attempt, updated_at = now(),
        details = COALESCE(EXCLUDED.details, history.step_progress.details),
        details_encoding = COALESCE(EXCLUDED.details_encoding,
                                    history.step_progress.details_encoding)
)
SELECT cancel_requested FROM live
"""


RECORD_HEARTBEAT = _heartbeat(
    f"SELECT workflow_id, cancel_requested FROM history.workflows WHERE {run_lease_held()}"
)

# An earlier run of a chain is archived under this key (chains.py), as SQL of its run id.
ARCHIVE_KEY = "'@~' || {run_id}"

# A remote step's call: its STEP_SCHEDULED event, its step task's row (the spec its executor
# loads, and its own fence mark) and the step task's scheduling request, in one statement. A
# step id the run before used starts with its mark one above that step's there (a fence nobody
# holds), so no lease of the earlier step reaches this one.
SCHEDULE_STEP = _append(
    _RECORD,
    also=f""", step_task AS (
    INSERT INTO history.step_tasks
        (workflow_id, step_id, step_type, task_queue, input, input_encoding, retry,
         timeout_seconds, heartbeat_timeout_seconds, fence)
    SELECT workflow_id, %(step_id)s, %(name)s, %(task_queue)s, %(payload)s,
           %(payload_encoding)s, %(retry)s, %(timeout_seconds)s, %(heartbeat_timeout_seconds)s,
           COALESCE((
               SELECT p.fence + 1 FROM history.workflows w JOIN history.step_tasks p
                 ON p.workflow_id = {ARCHIVE_KEY.format(run_id="w.previous_run_id")}
               WHERE w.workflow_id = appended.workflow_id AND p.step_id = %(step_id)s), 0)
    FROM appended
), scheduled AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, step_id, run_number, run_flow, step_flow)
    SELECT workflow_id, %(name)s, %(task_queue)s, %(step_id)s, run_number,
           (SELECT w.flow FROM history.workflows w WHERE w.workflow_id = appended.workflow_id),
           %(step_flow)s
    FROM appended
)""",
)

# A child workflow's call (CHILD_WORKFLOW_STARTED), under the parent's lease; the child's run is
# started in the same transaction (children.py).
START_CHILD = _append(_RECORD)

# Takes up a step task: raises the step's fence mark (a lower fence matches no row) and
# returns what to execute, the attempt it is at and the last progress of an earlier attempt.
# The load starts the attempt (STEP_ATTEMPT_STARTED, before the body runs), unless the last
# attempt started was never recorded: then that attempt was lost with its worker
# (attempt_lost), and the executor records it as failed instead of running. A load sent again
# with the same fence (its answer was lost) starts nothing new.
LOAD_STEP = (
    f"""
WITH prior AS (
    SELECT s.fence AS prior_fence,
           (SELECT count(*) FROM history.events e
            WHERE e.workflow_id = s.workflow_id AND e.step_id = s.step_id
              AND e.event_type = 'STEP_ATTEMPT_FAILED') AS failed,
           (SELECT COALESCE(max(e.attempt), 0) FROM history.events e
            WHERE e.workflow_id = s.workflow_id AND e.step_id = s.step_id
              AND e.event_type = 'STEP_ATTEMPT_STARTED') AS started
    FROM history.step_tasks s
    WHERE s.workflow_id = %(workflow_id)s AND s.step_id = %(step_id)s
), task AS (
    UPDATE history.step_tasks s SET {TAKE_LEASE}
    FROM history.workflows w
    WHERE {step_lease_taken("s.")} AND w.workflow_id = s.workflow_id
    RETURNING s.workflow_id, s.step_type, s.input, s.input_encoding, s.retry, s.timeout_seconds,
              s.heartbeat_timeout_seconds, s.closed, w.status, w.workflow_type
), plan AS (
    SELECT task.*,
           prior.started > prior.failed AND prior.prior_fence < %(fence)s AS attempt_lost,
           CASE WHEN prior.started > prior.failed THEN prior.started
                ELSE prior.failed + 1 END AS attempt,
           prior.started <= prior.failed AND NOT task.closed AND task.status IN {OPEN}
               AS starts
    FROM task, prior
), appended AS (
    UPDATE history.workflows w SET {count_event(event_values())}
    FROM plan WHERE w.workflow_id = plan.workflow_id AND plan.starts
    RETURNING w.workflow_id, w.event_count, w.part
)"""
    + insert_event(
        event_values(
            event_type=f"'{EventType.STEP_ATTEMPT_STARTED}'",
            fence=_parameter("fence"),
            step_id=_parameter("step_id"),
            step_name="plan.step_type",
            attempt="plan.attempt",
            started_at="now()",
        ),
        source="appended, plan",
    )
    + """
SELECT plan.*,
       (SELECT p.details FROM history.step_progress p
        WHERE p.workflow_id = plan.workflow_id AND p.step_id = %(step_id)s) AS heartbeat_details,
       (SELECT p.details_encoding FROM history.step_progress p
        WHERE p.workflow_id = plan.workflow_id AND p.step_id = %(step_id)s)
           AS heartbeat_details_encoding
FROM plan
"""
)

RETRY = f"'{WaitKind.RETRY.wake_reason}'"  # as SQL: a failed attempt's retry is a timed wait

# A step task's record of one attempt of its remote step, fenced by the step's own mark. A
# failed attempt (due_in set) makes the step task due again at the retry time; a final outcome
# closes the step and wakes the workflow, which finds it on replay.
RECORD_STEP_TASK = (
    f"""
WITH task AS (
    UPDATE history.step_tasks SET closed = %(final)s
    WHERE {step_lease_held()}
    RETURNING workflow_id, step_type, task_queue
), appended AS (
    UPDATE history.workflows w SET {count_event()}
    FROM task WHERE w.workflow_id = task.workflow_id AND w.status IN {OPEN}
    RETURNING w.workflow_id, w.workflow_type, w.task_queue, w.event_count, w.cancel_requested,
              w.run_number, w.part, task.step_type, task.task_queue AS step_queue
)"""
    + insert_event(
        event_values(
            **{
                name: _parameter(name)
                for name in (
                    "event_type",
                    "fence",
                    "step_id",
                    "attempt",
                    "payload",
                    "payload_encoding",
                    "payload_sha256",
                    "failure",
                    "due_in",
                    "started_at",
                    "usage",
                )
            },
            step_name="appended.step_type",
        )
    )
    + f""", scheduled AS (
    INSERT INTO history.outbox (workflow_id, workflow_type, task_queue, run_at, wake_reason,
                                step_id, run_number)
    SELECT a.workflow_id, a.workflow_type, a.task_queue, NULL, NULL, NULL, a.run_number
    FROM appended a WHERE %(final)s
    UNION ALL
    SELECT a.workflow_id, a.step_type, a.step_queue, i.due_at, {RETRY}, %(step_id)s, a.run_number
    FROM appended a, inserted i WHERE NOT %(final)s
)
SELECT inserted.event_id, inserted.due_at, appended.cancel_requested FROM inserted, appended
"""
)

SELECT_REMOTE_OUTCOME = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND position IS NULL
  AND event_type IN ('STEP_COMPLETED', 'STEP_FAILED')
"""

# A remote step's progress, under its step task's fence.
RECORD_STEP_HEARTBEAT = _heartbeat(
    f"""SELECT w.workflow_id, w.cancel_requested FROM history.step_tasks s
    JOIN history.workflows w USING (workflow_id)
    WHERE {step_lease_held("s.")} AND w.status IN {OPEN}"""
)

SELECT_SIGNAL = """SELECT 1 FROM history.events e JOIN history.workflows r USING (workflow_id)
WHERE e.signal_id = %(signal_id)s AND r.chain_id = %(workflow_id)s"""

SELECT_STEP_EVENT = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND position IS NOT NULL AND event_type <> 'PATCH_RECORDED'
  AND (step_id = %(step_id)s OR position = %(position)s)
"""

# A run's marker of a patch (its step id names the patch): recorded once per run.
SELECT_PATCH = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND event_type = 'PATCH_RECORDED'
"""

SELECT_ATTEMPT_EVENT = f"""
SELECT {EVENT_COLUMNS} FROM history.events
WHERE workflow_id = %(workflow_id)s AND step_id = %(step_id)s AND attempt = %(attempt)s
  AND event_type = 'STEP_ATTEMPT_FAILED'
"""


def _events_page(columns: str, payload_bytes: str, part: str = "") -> str:
    """A page of a run's events after %(after)s, oldest first: at most %(rows)s events and
    %(budget)s bytes (the first event whatever its size), each event's bytes reckoned from its
    payload (`payload_bytes`, SQL), failure, wait and trace context plus a margin for the rest.
    The cut is made on the sizes alone, before any payload is read. `candidates` (on every row)
    is how many of the next %(rows)s + 1 events there were: more than the page holds means the
    journal goes on. `part`, when the caller knows the run's (%(part)s): the reads go to its
    partition alone."""
    in_part = " AND part = %(part)s" if part else ""
    return f"""
WITH sized AS (
    SELECT event_id,
           256 + {payload_bytes} + COALESCE(octet_length(failure::text), 0)
           + COALESCE(octet_length(wait::text), 0)
           + COALESCE(octet_length(trace_context::text), 0)
           + 10 * COALESCE(cardinality(consumed), 0) AS wire_bytes
    FROM history.events
    WHERE workflow_id = %(workflow_id)s AND event_id > %(after)s{in_part}
    ORDER BY event_id
    LIMIT %(rows)s::int + 1
), page AS (
    SELECT event_id, sum(wire_bytes) OVER w AS running, row_number() OVER w AS n,
           count(*) OVER () AS candidates
    FROM sized
    WINDOW w AS (ORDER BY event_id)
)
SELECT {columns}, page.candidates
FROM history.events JOIN page USING (event_id)
WHERE workflow_id = %(workflow_id)s{in_part} AND n <= %(rows)s AND (n = 1 OR running <= %(budget)s)
ORDER BY event_id
"""


# A page of the journal as the public API shows it: payloads inline.
SELECT_EVENTS = _events_page(
    EVENT_COLUMNS,
    "COALESCE(octet_length(payload), (SELECT octet_length(p.data) FROM history.payloads p"
    " WHERE p.sha256 = events.payload_sha256), 0)",
)
# A page of the journal as a worker loads it: payloads stored by content as references, and on
# each row the database clock as the row left (`db_clock`), read after the events, so that it
# lags the answer's arrival less than the load's `now`. One row with no event when the page is
# empty.
SELECT_JOURNAL_PAGE = f"""
SELECT clock_timestamp() AS db_clock, page.*
FROM (VALUES (1)) AS one (x)
LEFT JOIN ({_events_page(JOURNAL_EVENT_COLUMNS, "COALESCE(octet_length(payload), 0)", "part")}) page
ON true
ORDER BY page.event_id
"""

# The events DescribeWorkflow is made of: step outcomes and attempts, signals, state. Only the
# payloads it shows whatever the journal's size are read: pending signals' and the latest value
# of each state key. A step's output comes with its size alone (payload_size): SELECT_OUTPUTS
# reads those that fit in the description.
SELECT_DESCRIBED_EVENTS = f"""
SELECT {_EVENT_FIELDS},
       CASE WHEN event_type = 'STATE_UPDATED' AND latest
              OR event_type = 'SIGNAL_RECEIVED' AND NOT EXISTS (
                  SELECT FROM history.signal_consumptions c
                  WHERE c.workflow_id = events.workflow_id AND c.event_id = events.event_id)
            THEN {_PAYLOAD_VALUE} END AS payload,
       COALESCE(octet_length(payload), (SELECT octet_length(p.data) FROM history.payloads p
                                        WHERE p.sha256 = events.payload_sha256)) AS payload_size
FROM (
    SELECT *, row_number() OVER (PARTITION BY event_type, name ORDER BY event_id DESC) = 1
                  AS latest
    FROM history.events
    WHERE workflow_id = %s AND event_type IN (
        'STEP_SCHEDULED', 'STEP_COMPLETED', 'STEP_FAILED', 'STEP_ATTEMPT_FAILED',
        'SIGNAL_RECEIVED', 'SIGNAL_CONSUMED', 'STATE_UPDATED')
) events
ORDER BY event_id
"""

# The payloads of some of a run's events (the step outputs a description shows).
SELECT_OUTPUTS = f"""
SELECT event_id, payload_encoding, {_INLINE_PAYLOAD} FROM history.events
WHERE workflow_id = %(workflow_id)s AND event_id = ANY(%(event_ids)s::bigint[])
"""

# The latest value published under a key.
SELECT_STATE = f"""
SELECT {_INLINE_PAYLOAD}, payload_encoding, created_at FROM history.events
WHERE workflow_id = %(workflow_id)s AND event_type = 'STATE_UPDATED' AND name = %(key)s
ORDER BY event_id DESC LIMIT 1
"""

LIST_WORKFLOWS = f"""
SELECT run_seq, {WORKFLOW_COLUMNS} FROM history.workflows
WHERE namespace = %(namespace)s
  AND workflow_id = chain_id  -- each workflow id's latest run
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(workflow_type)s::text IS NULL OR workflow_type = %(workflow_type)s)
  AND (%(id_prefix)s::text IS NULL OR starts_with(workflow_id, %(id_prefix)s))
  AND (NOT %(stuck)s OR stuck_since IS NOT NULL)
  AND (%(parent_workflow_id)s::text IS NULL OR parent_workflow_id = %(parent_workflow_id)s)
  AND (%(before)s::bigint IS NULL OR run_seq < %(before)s)
ORDER BY run_seq DESC
LIMIT %(limit)s
"""


def event_params(
    *,
    workflow_id: str,
    event_type: EventType,
    fence: int = 0,
    lease_key: str = "",
    step_id: str | None = None,
    step_name: str | None = None,
    position: int | None = None,
    attempt: int | None = None,
    payload: Payload | None = None,
    failure: dict[str, str] | None = None,
    due_at: datetime | None = None,
    due_in: float | None = None,
    name: str | None = None,
    signal_id: str | None = None,
    consumed: list[int] | None = None,
    started_at: datetime | None = None,
    wait: dict[str, Any] | None = None,
    run_at: datetime | None = None,
    wake: bool = False,
    wake_reason: str | None = None,
    trace_context: dict[str, str] | None = None,
    task_queue: str | None = None,
    usage: dict[str, Any] | None = None,
    unless_cancel: bool = False,
    child_workflow_id: str | None = None,
    child_run_id: str | None = None,
) -> dict[str, Any]:
    """Parameters of the append statements for one event (EVENT_PARAMS), the lease it is
    written under (`fence` and `lease_key`, the API key of the caller: "" without keys;
    platform writes need none), the wake-up it schedules, and whether a cancel request of the
    run keeps it out of the journal (`unless_cancel`, RECORD_EVENTS only)."""
    return {
        "unless_cancel": unless_cancel,
        "workflow_id": workflow_id,
        "event_type": str(event_type),
        "fence": fence,
        "step_id": step_id,
        "step_name": step_name,
        "position": position,
        "attempt": attempt,
        **payload_columns("payload", stored := _event_payload(event_type, payload)),
        "payload_sha256": by_content(stored),
        "failure": json_or_none(failure),
        "due_at": due_at,
        "due_in": due_in,
        "name": name,
        "signal_id": signal_id,
        "consumed": consumed,
        "started_at": started_at,
        "wait": json_or_none(wait),
        "trace_context": json_or_none(trace_context or None),
        "task_queue": task_queue,
        "child_workflow_id": child_workflow_id,
        "child_run_id": child_run_id,
        "usage": json_or_none(usage),
        "run_at": run_at,
        "wake": wake,
        "wake_reason": wake_reason,
        "lease_key": lease_key,
    }


def _event_payload(event_type: EventType, payload: Payload | None) -> Payload | None:
    if event_type not in PAYLOAD_EVENTS:
        return None
    return payload if payload is not None else null_payload()


@functools.cache
def _ref_bytes() -> int:
    return limits.payload_ref_bytes()


def by_content(payload: Payload | None) -> bytes | None:
    """The SHA-256 under which a payload is stored by content, if it is that large (None: it
    stays inline in its event)."""
    if payload is None or len(payload.data) < _ref_bytes():
        return None
    return hashlib.sha256(payload.data).digest()
