"""Approvals: a run's request for a person's decision (ctx.approval), kept as a record beside
the journal (docs/worker-protocol.md §29).

- Requested by the run's code at a call: APPROVAL_REQUESTED and the approval's row are written
  by one statement under the lease; its id is fixed by the run and the call's position, so a
  request sent again finds the first.
- Decided once (DecideApproval): the row, the audit log's entry and APPROVAL_DECIDED (which
  wakes the run) in one transaction, refused when the details' hash is not the one its decider
  saw, when it is decided or expired already, or when the caller is not an approver.
- Escalated and expired by the approval watch (ApprovalWatch) on the database clock: a
  decision committed first wins, as each takes the row's lock and looks at its status.

A decision reaches the run only as APPROVAL_DECIDED, an event type of its own: no signal can
make one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg_pool import AsyncConnectionPool

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import auth, errors, namespaces
from perdure.common.background import BackgroundLoop
from perdure.common.convert import seconds_of, timestamp
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.common.payload import json_payload, validate_payload
from perdure.common.reasons import Reason
from perdure.common.text import require_storable
from perdure.history import fencing, keys, store
from perdure.history.appends import JournalBase
from perdure.history.metrics import timed_write
from perdure.history.model import Call, EventType, Lease
from perdure.history.rows import Row, fetch_all, fetch_one, payload_in
from perdure.telemetry.propagation import untraced

log = logging.getLogger(__name__)

APPROVAL_PREFIX = "$approval:"  # the step ids of ctx.approval's calls
ANONYMOUS = "anonymous"  # who decides when authentication is off and nobody says
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_NAME_LENGTH = 200
MAX_DECIDERS = 20
MAX_TIMEOUT_SECONDS = 366 * 24 * 3600.0
WATCH_SECONDS = 0.25  # how late past its time an approval may escalate or expire, at most


@dataclass(frozen=True)
class Asked:
    """What a RequestApproval asks for, validated."""

    name: str
    details: Payload
    timeout: float  # seconds
    escalate_after: float | None
    approvers: list[str]
    escalate_to: list[str]


def approval_request(request: jpb.RequestApprovalRequest) -> Asked:
    """A RequestApproval's approval, validated (its call is call_of's)."""
    if not request.step_name.startswith(APPROVAL_PREFIX):
        raise errors.invalid_argument(f"step_name must start with {APPROVAL_PREFIX!r}")
    if not 1 <= len(request.name) <= MAX_NAME_LENGTH:
        raise errors.invalid_argument(f"name must be 1 to {MAX_NAME_LENGTH} characters")
    require_storable("name", request.name)
    if not request.HasField("timeout"):
        raise errors.invalid_argument("timeout is required: how long the approval waits")
    timeout = seconds_of("timeout", request.timeout)
    if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise errors.invalid_argument(
            f"timeout must be more than 0 s and at most a year, not {timeout:g}s"
        )
    escalate_after = None
    if request.HasField("escalate_after"):
        escalate_after = seconds_of("escalate_after", request.escalate_after)
        if not 0 < escalate_after < timeout:
            raise errors.invalid_argument(
                f"escalate_after must be more than 0 s and less than timeout ({timeout:g}s), "
                f"not {escalate_after:g}s"
            )
    return Asked(
        name=request.name,
        details=validate_payload("details", request.details),
        timeout=timeout,
        escalate_after=escalate_after,
        approvers=_deciders("approvers", request.approvers),
        escalate_to=_deciders("escalate_to", request.escalate_to),
    )


def _deciders(field: str, entries: Any) -> list[str]:
    values = list(entries)
    if len(values) > MAX_DECIDERS:
        raise errors.invalid_argument(f"{field} holds at most {MAX_DECIDERS} entries")
    for value in values:
        if not 1 <= len(value) <= MAX_NAME_LENGTH or value != value.strip():
            raise errors.invalid_argument(
                f"{field}: each entry is a role name or an API key id of 1 to "
                f"{MAX_NAME_LENGTH} characters without surrounding spaces, not {value[:70]!r}"
            )
        require_storable(field, value)
    return values


def approval_id_of(run_id: str, position: int) -> str:
    """An approval's id: fixed by its run and its call's position."""
    digest = hashlib.sha256(f"{run_id}/{position}".encode()).hexdigest()
    return f"apr-{digest[:24]}"


def _parameter(name: str) -> str:
    return f"%({name})s::{store.EVENT_PARAMS[name]}"


# APPROVAL_REQUESTED at the code's call, under its lease, and the approval's row, in one
# statement: when the lease does not hold, neither is written; when the call is recorded
# already (a request sent again), the event's unique indexes undo both.
REQUEST = (
    f"""WITH appended AS (
    UPDATE history.workflows SET {store.count_event()}
    WHERE {fencing.run_lease_held()}
    RETURNING workflow_id, workflow_type, event_count, cancel_requested, chain_id, run_id,
              namespace, part
)"""
    + store.insert_event(_parameter)
    + """, approval AS (
    INSERT INTO history.approvals
        (approval_id, namespace, run_key, workflow_id, run_id, workflow_type, step_id, position,
         name, details, details_encoding, details_sha256, approvers, escalate_to, escalate_at,
         expires_at)
    SELECT %(approval_id)s, a.namespace, a.workflow_id, %(public_id)s, a.run_id,
           a.workflow_type, %(step_id)s, %(position)s, %(approval_name)s, %(payload)s,
           %(payload_encoding)s, %(details_sha256)s, %(approvers)s, %(escalate_to)s,
           now() + make_interval(secs => %(escalate_after)s::float8),
           now() + make_interval(secs => %(timeout)s::float8)
    FROM appended a
    RETURNING approval_id, expires_at, escalate_at
)
SELECT inserted.event_id, appended.cancel_requested, approval.*
FROM inserted, appended, approval
"""
)

SELECT_RUN_ID = "SELECT run_id FROM history.workflows WHERE workflow_id = %s"
SELECT_KEY_NAME = "SELECT NULLIF(name, '') AS name FROM history.api_keys WHERE key_id = %s"
SELECT_BY_CALL = """
SELECT approval_id, expires_at, escalate_at FROM history.approvals
WHERE run_key = %(workflow_id)s AND position = %(position)s
"""
_COLUMNS = """approval_id, namespace, workflow_id, run_id, workflow_type, step_id, name,
    details, details_encoding, details_sha256, approvers, escalate_to, status, created_at,
    escalate_at, expires_at, escalated_at, decided_by, decided_at, reason, run_key, seq"""
SELECT_ONE = f"""
SELECT {_COLUMNS}, clock_timestamp() AS clock FROM history.approvals
WHERE approval_id = %(approval_id)s AND namespace = %(namespace)s
"""
LOCK_ONE = SELECT_ONE + " FOR UPDATE"
LIST = f"""
SELECT {_COLUMNS} FROM history.approvals
WHERE namespace = %(namespace)s
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(workflow_id)s::text IS NULL OR workflow_id = %(workflow_id)s)
  AND (%(before)s::bigint IS NULL OR seq < %(before)s)
ORDER BY seq DESC LIMIT %(limit)s
"""
PENDING_OF_RUN = f"""
SELECT {_COLUMNS} FROM history.approvals
WHERE run_key = %s AND status = 'PENDING' ORDER BY seq
"""
DECIDE = f"""
UPDATE history.approvals
SET status = %(status)s, decided_by = %(decided_by)s, decided_at = clock_timestamp(),
    reason = %(reason)s
WHERE approval_id = %(approval_id)s
RETURNING {_COLUMNS}
"""
ESCALATE = """
UPDATE history.approvals SET escalated_at = clock_timestamp()
WHERE approval_id = %s RETURNING escalated_at
"""
EXPIRE = """
UPDATE history.approvals SET status = 'EXPIRED'
WHERE approval_id = %s RETURNING clock_timestamp() AS expired_at
"""
# The watch's next approval to escalate or expire, skipping those another replica or a
# decision holds (it looks again at its next round).
_ESCALATION_DUE = "status = 'PENDING' AND escalated_at IS NULL AND escalate_at <= clock_timestamp()"
_EXPIRY_DUE = "status = 'PENDING' AND expires_at <= clock_timestamp()"
# A pending approval whose run closed (cancelled, terminated, failed...): nobody waits for its
# decision any more, so it leaves the inbox as expired.
_OF_CLOSED_RUN = f"""
FROM history.approvals a JOIN history.workflows w ON w.workflow_id = a.run_key
WHERE a.status = 'PENDING' AND w.status NOT IN {fencing.OPEN}"""
DUE_TO_ESCALATE = f"""
SELECT {_COLUMNS} FROM history.approvals WHERE {_ESCALATION_DUE}
ORDER BY escalate_at LIMIT 1 FOR UPDATE SKIP LOCKED
"""
DUE_TO_EXPIRE = f"""
SELECT {_COLUMNS} FROM history.approvals WHERE {_EXPIRY_DUE}
ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED
"""
OF_CLOSED_RUN = f"""
SELECT {", ".join(f"a.{column.strip()}" for column in _COLUMNS.split(","))} {_OF_CLOSED_RUN}
LIMIT 1 FOR UPDATE OF a SKIP LOCKED
"""
# Whether any of the three has a row: one statement, outside a transaction, so that a round
# with nothing due (nearly every round) costs one round trip, not three transactions.
ANY_DUE = f"""
SELECT EXISTS (SELECT FROM history.approvals WHERE {_ESCALATION_DUE})
    OR EXISTS (SELECT FROM history.approvals WHERE {_EXPIRY_DUE})
    OR EXISTS (SELECT {_OF_CLOSED_RUN}) AS due
"""

_STATUSES = {
    "PENDING": wf.APPROVAL_STATUS_PENDING,
    "APPROVED": wf.APPROVAL_STATUS_APPROVED,
    "REJECTED": wf.APPROVAL_STATUS_REJECTED,
    "EXPIRED": wf.APPROVAL_STATUS_EXPIRED,
}
_STATUS_NAMES = {number: name for name, number in _STATUSES.items()}


def approval_message(row: Row) -> wf.Approval:
    """An approvals row as the public Approval."""
    return wf.Approval(
        approval_id=row["approval_id"],
        namespace=row["namespace"],
        workflow_id=row["workflow_id"],
        run_id=row["run_id"],
        workflow_type=namespaces.split(row["workflow_type"])[1],
        name=row["name"],
        details=payload_in(row, "details"),
        details_sha256=bytes(row["details_sha256"]).hex(),
        approvers=row["approvers"],
        escalate_to=row["escalate_to"],
        status=_STATUSES[row["status"]],
        create_time=timestamp(row["created_at"]),
        escalate_time=timestamp(row["escalate_at"]),
        expire_time=timestamp(row["expires_at"]),
        escalated_time=timestamp(row["escalated_at"]),
        decided_by=row["decided_by"] or "",
        decide_time=timestamp(row["decided_at"]),
        reason=row["reason"] or "",
        step_id=row["step_id"],
    )


def _moment(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def _journal(
    conn: AsyncConnection, row: Row, event_type: EventType, content: dict[str, Any]
) -> bool:
    """Journal a platform event of the approval (no position; its request's step id) with
    `content` as its JSON payload, and wake the run; False when the run is closed."""
    params = store.event_params(
        workflow_id=row["run_key"],
        event_type=event_type,
        step_id=row["step_id"],
        step_name=APPROVAL_PREFIX + row["name"],
        name=row["approval_id"],
        payload=json_payload(json.dumps({"approval_id": row["approval_id"], **content})),
        wake=True,
    )
    # The statement of any event from outside the run that wakes it (a signal's); no signal
    # id, so no dedupe.
    with timed_write(event_type.lower()):
        return await fetch_one(conn, store.SIGNAL, params) is not None


async def escalate(conn: AsyncConnection, row: Row) -> Row:
    """Mark a pending approval (locked) escalated and tell its run: APPROVAL_ESCALATED."""
    marked = await fetch_one(conn, ESCALATE, [row["approval_id"]])
    assert marked is not None
    content = {"escalated_at": _moment(marked["escalated_at"]), "escalate_to": row["escalate_to"]}
    await _journal(conn, row, EventType.APPROVAL_ESCALATED, content)
    log.info("approval %s escalated", row["approval_id"])
    return {**row, **marked}


async def expire(conn: AsyncConnection, row: Row) -> None:
    """Mark a pending approval (locked) past its expiry expired and tell its run (if open):
    APPROVAL_EXPIRED."""
    marked = await fetch_one(conn, EXPIRE, [row["approval_id"]])
    assert marked is not None
    content = {
        "expires_at": _moment(row["expires_at"]),
        "expired_at": _moment(marked["expired_at"]),
    }
    await _journal(conn, row, EventType.APPROVAL_EXPIRED, content)
    log.info("approval %s expired", row["approval_id"])


def may_decide(row: Row, key_id: str, key_name: str, role: int) -> bool:
    """Whether the caller (its key id, name and role; none with authentication off) is one of
    the approval's approvers, or of its escalate_to once it is escalated. An entry is a role
    name (a key of that role or a higher one), else a key's id or name; no approvers: any
    operator."""
    if not auth.auth_enabled():
        return True
    allowed = list(row["approvers"]) or ["operator"]
    if row["escalated_at"] is not None:
        allowed += row["escalate_to"]
    return any(_matches(entry, key_id, key_name, role) for entry in allowed)


_ROLES = {
    "reader": admin.ROLE_READER,
    "operator": admin.ROLE_OPERATOR,
    "admin": admin.ROLE_ADMIN,
}


def _matches(entry: str, key_id: str, key_name: str, role: int) -> bool:
    needed = _ROLES.get(entry)
    if needed is not None:
        return role in admin.Role.values() and auth.role_allows(role, needed)
    return entry in (key_id, key_name)


class Approvals(JournalBase):
    """Requesting, deciding, escalating, expiring and reading approvals."""

    async def request_approval(self, call_params: dict[str, Any], asked: Asked) -> Row:
        """APPROVAL_REQUESTED at the call `call_params` names (store.event_params with its
        lease), and the approval's row: its id, expires_at and escalate_at, with the event's id
        and cancel_requested; the first answer again when the call is recorded already."""
        workflow_id = call_params["workflow_id"]
        async with self._pool.connection() as conn:
            run = await fetch_one(conn, SELECT_RUN_ID, [workflow_id])
            if run is None:
                raise fencing.run_not_found(workflow_id)
            approval_id = approval_id_of(run["run_id"], call_params["position"])
            params = call_params | {
                "name": approval_id,
                "approval_id": approval_id,
                "public_id": namespaces.split(workflow_id)[1],
                "approval_name": asked.name,
                "details_sha256": hashlib.sha256(asked.details.data).digest(),
                "approvers": asked.approvers,
                "escalate_to": asked.escalate_to,
                "timeout": asked.timeout,
                "escalate_after": asked.escalate_after,
            }
            try:
                with timed_write("approval_requested"):
                    row = await fetch_one(conn, REQUEST, params)
            except UniqueViolation:  # the call is recorded: this request again, or another
                known = await fetch_one(conn, SELECT_BY_CALL, params)
                if known is not None and known["approval_id"] == approval_id:
                    call = _call_of(params)
                    appended = await self._existing_call(conn, call, params)
                    return {**known, "event_id": appended.event_id, "cancel_requested": False}
                raise errors.failed_precondition(
                    Reason.STEP_CONFLICT,
                    f"workflow {workflow_id!r} already recorded something different for step "
                    f"{params['step_id']!r} or position {params['position']}; replay the "
                    "journal instead of re-running the call",
                ) from None
            if row is None:
                raise await fencing.rejection(conn, _call_of(params).lease)
        self._on_committed(workflow_id, False)
        return row

    async def decide_approval(
        self, request: apb.DecideApprovalRequest, namespace: str, key_id: str, role: int
    ) -> wf.Approval:
        """Approve or reject, once, as `key_id` (with `role`): the row, the audit log and
        APPROVAL_DECIDED (waking the run) in one transaction; refused as the module says."""
        refusal: errors.ApiError | None = None
        async with self._pool.connection() as conn, conn.transaction():
            keys_ = {"approval_id": request.approval_id, "namespace": namespace}
            row = await fetch_one(conn, LOCK_ONE, keys_)
            if row is None:
                raise errors.not_found(
                    Reason.APPROVAL_NOT_FOUND,
                    f"namespace {namespace!r} has no approval {request.approval_id!r}",
                )
            if row["status"] == "PENDING" and row["expires_at"] <= row["clock"]:
                await expire(conn, row)  # as the watch would have; committed, then refused
                refusal = _expired(row)
            else:
                if row["status"] != "PENDING":
                    raise _expired(row) if row["status"] == "EXPIRED" else _decided(row)
                due = row["escalate_at"] is not None and row["escalate_at"] <= row["clock"]
                if due and row["escalated_at"] is None:
                    row = await escalate(conn, row)
                decided = await self._decide(conn, row, request, key_id, role)
        if refusal is not None:
            self._on_scheduled()
            raise refusal
        self._on_scheduled()
        self._on_committed(row["run_key"], False)
        return approval_message(decided)

    async def _decide(
        self,
        conn: AsyncConnection,
        row: Row,
        request: apb.DecideApprovalRequest,
        key_id: str,
        role: int,
    ) -> Row:
        key = await fetch_one(conn, SELECT_KEY_NAME, [key_id]) if key_id else None
        if not may_decide(row, key_id, (key or {}).get("name") or "", role):
            raise auth.permission_denied(
                f"API key {key_id} may not decide approval {row['approval_id']!r}: its "
                f"approvers are {_named(row['approvers']) or 'operator (the default)'}"
                + (
                    f", and once escalated {_named(row['escalate_to'])}"
                    if row["escalate_to"]
                    else ""
                )
            )
        if request.details_sha256.lower() != bytes(row["details_sha256"]).hex():
            raise errors.failed_precondition(
                Reason.APPROVAL_DETAILS_CHANGED,
                f"approval {row['approval_id']!r}: details changed: details_sha256 "
                f"{request.details_sha256[:70]!r} is not the hash of its details "
                f"({bytes(row['details_sha256']).hex()}); read the approval again and decide "
                "on what it says now",
            )
        decided_by = key_id or request.decided_by or ANONYMOUS
        status = "APPROVED" if request.approve else "REJECTED"
        params = {
            "approval_id": row["approval_id"],
            "status": status,
            "decided_by": decided_by,
            "reason": request.reason,
        }
        decided = await fetch_one(conn, DECIDE, params)
        assert decided is not None
        content = {
            "approved": request.approve,
            "decided_by": decided_by,
            "reason": request.reason,
            "decided_at": _moment(decided["decided_at"]),
            "escalated": decided["escalated_at"] is not None,
        }
        if not await _journal(conn, decided, EventType.APPROVAL_DECIDED, content):
            raise errors.failed_precondition(
                Reason.APPROVAL_EXPIRED,
                f"approval {row['approval_id']!r}: its run of workflow {row['workflow_id']!r} "
                "is closed; nobody waits for this decision any more",
            )
        details = {"approval_id": row["approval_id"], "name": row["name"], "reason": request.reason}
        await keys.audit(
            conn, key_id, row["namespace"], f"APPROVAL_{status}", row["workflow_id"], details
        )
        return decided

    async def get_approval(self, namespace: str, approval_id: str) -> wf.Approval:
        async with self._pool.connection() as conn:
            row = await fetch_one(
                conn, SELECT_ONE, {"approval_id": approval_id, "namespace": namespace}
            )
        if row is None:
            raise errors.not_found(
                Reason.APPROVAL_NOT_FOUND,
                f"namespace {namespace!r} has no approval {approval_id!r}",
            )
        return approval_message(row)

    async def list_approvals(
        self, request: apb.ListApprovalsRequest, namespace: str
    ) -> apb.ListApprovalsResponse:
        """A page of the namespace's approvals, newest first."""
        limit = request.page_size or DEFAULT_PAGE_SIZE
        before = decode_page_token(request.page_token)
        params = {
            "namespace": namespace,
            "status": _STATUS_NAMES.get(request.status),
            "workflow_id": request.workflow_id or None,
            "before": before,
            "limit": limit + 1,
        }
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, LIST, params)
        more = len(rows) > limit
        rows = rows[:limit]
        return apb.ListApprovalsResponse(
            approvals=[approval_message(row) for row in rows],
            next_page_token=encode_page_token(rows[-1]["seq"]) if more else "",
        )

    async def pending_approvals(self, run_key: str) -> list[wf.Approval]:
        """A run's approvals waiting for a decision, oldest first."""
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, PENDING_OF_RUN, [run_key])
        return [approval_message(row) for row in rows]


def _call_of(params: dict[str, Any]) -> Call:
    lease = Lease(params["workflow_id"], params["fence"], params["lease_key"])
    return Call(lease, params["step_id"], params["step_name"], params["position"])


def _named(entries: list[str]) -> str:
    return ", ".join(entries)


def _decided(row: Row) -> errors.ApiError:
    return errors.failed_precondition(
        Reason.APPROVAL_DECIDED,
        f"approval {row['approval_id']!r} was {row['status'].lower()} already by "
        f"{row['decided_by']} at {_moment(row['decided_at'])}: a decision is taken once",
    )


def _expired(row: Row) -> errors.ApiError:
    return errors.failed_precondition(
        Reason.APPROVAL_EXPIRED,
        f"approval {row['approval_id']!r} expired at {_moment(row['expires_at'])} undecided; "
        "its run was told so",
    )


class ApprovalWatch(BackgroundLoop):
    """Escalates and expires approvals on the database clock: four times a second it asks
    whether any is due (one statement), and changes each due one in a transaction of its own
    that takes its row's lock, so a decision committed first wins. The pending approvals of
    runs that closed expire too."""

    def __init__(self, pool: AsyncConnectionPool, on_scheduled: Any) -> None:
        super().__init__("approval watch", self.watch, WATCH_SECONDS)
        self._pool = pool
        self._on_scheduled = on_scheduled

    async def watch(self) -> None:
        with untraced():  # the poll runs all the time; the changes are logged
            if not await self._any_due():
                return
            while (
                await self._one(DUE_TO_ESCALATE, escalate)
                or await self._one(DUE_TO_EXPIRE, expire)
                or await self._one(OF_CLOSED_RUN, expire)
            ):
                pass

    async def _any_due(self) -> bool:
        async with self._pool.connection() as conn:
            row = await fetch_one(conn, ANY_DUE, None)
        return bool(row and row["due"])

    async def _one(self, query: str, change: Any) -> bool:
        async with self._pool.connection() as conn, conn.transaction():
            row = await fetch_one(conn, query, None)
            if row is None:
                return False
            await change(conn, row)
        self._on_scheduled()
        return True
