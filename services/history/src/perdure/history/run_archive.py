"""A run as an archive, and back: the one home of the format that `perdure workflow export`,
`perdure workflow import` and the archive writer (archive.py) share.

An archive is gzip-compressed JSON lines:

1. the header: `{"format": "perdure-run", "version": 1, "run": {...}, "step_tasks": [...],
   "step_progress": [...], "signal_consumptions": [...]}`: every column of the run's
   `history.workflows` row and of its remote steps', last heartbeats' and signal
   consumptions' rows, as the database holds them;
2. one line per event, in order: `{"event": {...}, "payload_data": ...}`: every column of its
   `history.events` row; a payload stored by content (`payload_sha256`) travels inline in
   `payload_data` and is stored by content again on import;
3. the trailer: `{"end": {"events": N, "sha256": ...}}`, the SHA-256 of every line before it
   (their bytes, newlines included): a file cut short or changed is refused.

Values are JSON as PostgreSQL's to_jsonb spells them (timestamps to the microsecond, jsonb as
JSON), except bytea, which is base64. Names stay qualified by the namespace they were stored
in (namespaces.py); an import re-qualifies them for its own namespace.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import psycopg
from psycopg import AsyncConnection

from perdure.common import errors, namespaces
from perdure.common.reasons import Reason
from perdure.history.model import OPEN_STATUSES
from perdure.history.rows import fetch_all, fetch_one
from perdure.history.store import PAYLOAD_REFERENCED

FORMAT = "perdure-run"
VERSION = 1
# An import reads at most this much (a compressed archive of a few MB may not unpack to more).
MAX_UNPACKED_BYTES = 256 * 1024 * 1024

# Every column archived, by table (a run_seq is the target's own: it orders its list).
RUN_COLUMNS = (
    "workflow_id",
    "chain_id",
    "run_id",
    "run_number",
    "previous_run_id",
    "next_run_id",
    "request_id",
    "namespace",
    "workflow_type",
    "task_queue",
    "status",
    "input",
    "input_encoding",
    "result",
    "result_encoding",
    "failure",
    "fence",
    "fence_key",
    "event_count",
    "history_bytes",
    "created_at",
    "updated_at",
    "closed_at",
    "wait_kind",
    "wait_name",
    "wait_until",
    "cancel_requested",
    "trace_context",
    "idle_loads",
    "loaded_event_count",
    "deadline",
    "stuck_since",
    "build_id",
    "reset_from_run_id",
    "forked_from_workflow_id",
    "forked_from_run_id",
    "copied_up_to_event_id",
    "debounce_key",
    "debounce_until",
    "singleton_key",
    "flow",
    "parent_workflow_id",
    "parent_run_id",
    "parent_step_id",
    "parent_close_policy",
)
EVENT_COLUMNS = (
    "workflow_id",
    "event_id",
    "event_type",
    "fence",
    "step_id",
    "step_name",
    "position",
    "attempt",
    "payload",
    "payload_encoding",
    "payload_sha256",
    "failure",
    "created_at",
    "due_at",
    "name",
    "signal_id",
    "consumed",
    "started_at",
    "wait",
    "trace_context",
    "task_queue",
    "child_workflow_id",
    "child_run_id",
    "usage",
)
STEP_TASK_COLUMNS = (
    "workflow_id",
    "step_id",
    "step_type",
    "task_queue",
    "input",
    "input_encoding",
    "retry",
    "timeout_seconds",
    "heartbeat_timeout_seconds",
    "fence",
    "fence_key",
    "closed",
)
STEP_PROGRESS_COLUMNS = (
    "workflow_id",
    "step_id",
    "attempt",
    "details",
    "details_encoding",
    "updated_at",
)
CONSUMPTION_COLUMNS = ("workflow_id", "event_id", "consumed_by")
# The run's own rows beside its events, by the header's name for them.
SIDE_TABLES = {
    "step_tasks": STEP_TASK_COLUMNS,
    "step_progress": STEP_PROGRESS_COLUMNS,
    "signal_consumptions": CONSUMPTION_COLUMNS,
}
# Columns of type bytea (base64 in the file).
BYTEA_COLUMNS = frozenset({"input", "result", "flow", "payload", "payload_sha256", "details"})
# Columns holding a name qualified by its namespace (besides the run's key).
QUALIFIED_COLUMNS = frozenset({"chain_id", "task_queue", "parent_workflow_id", "child_workflow_id"})


@dataclass(frozen=True)
class Imported:
    """What an import restored."""

    workflow_id: str  # the public id
    run_id: str
    event_count: int
    earlier_run: bool  # placed before its chain's latest run


# --- export ---------------------------------------------------------------------------------


def _select(table: str, columns: tuple[str, ...], where: str, order: str) -> str:
    listed = ", ".join(columns)
    return (
        f"SELECT to_jsonb(r) AS row FROM (SELECT {listed} FROM history.{table}"
        f" WHERE {where}) r ORDER BY r.{order}"
    )


SELECT_RUN = _select("workflows", RUN_COLUMNS, "workflow_id = %s", "workflow_id")
SELECT_SIDE = {
    "step_tasks": _select("step_tasks", STEP_TASK_COLUMNS, "workflow_id = %s", "step_id"),
    "step_progress": _select("step_progress", STEP_PROGRESS_COLUMNS, "workflow_id = %s", "step_id"),
    "signal_consumptions": _select(
        "signal_consumptions", CONSUMPTION_COLUMNS, "workflow_id = %s", "event_id"
    ),
}
SELECT_EVENTS = f"""
SELECT to_jsonb(r) - 'stored' AS row, r.stored
FROM (SELECT {", ".join(f"e.{c}" for c in EVENT_COLUMNS)}, p.data AS stored
      FROM history.events e LEFT JOIN history.payloads p ON p.sha256 = e.payload_sha256
      WHERE e.workflow_id = %s) r
ORDER BY r.event_id
"""
# The key of a run of a chain by its run id (the latest, when run_id is empty).
SELECT_RUN_KEY = """
SELECT workflow_id FROM history.workflows
WHERE chain_id = %(chain_id)s
  AND (run_id = %(run_id)s OR (%(run_id)s = '' AND workflow_id = %(chain_id)s))
"""


def _to_file(row: dict[str, Any]) -> dict[str, Any]:
    """A row from to_jsonb with its bytea columns (PostgreSQL's \\x hex) as base64."""
    return {
        column: base64.b64encode(bytes.fromhex(value[2:])).decode()
        if column in BYTEA_COLUMNS and value is not None
        else value
        for column, value in row.items()
    }


async def run_key(conn: AsyncConnection, chain_id: str, run_id: str) -> str:
    """The key of a chain's run (`run_id`, or its latest when empty); NOT_FOUND otherwise."""
    row = await fetch_one(conn, SELECT_RUN_KEY, {"chain_id": chain_id, "run_id": run_id})
    if row is None:
        public = namespaces.split(chain_id)[1]
        if run_id:
            raise errors.not_found(
                Reason.RUN_NOT_FOUND, f"workflow {public!r} has no run {run_id!r}"
            )
        raise errors.not_found(Reason.WORKFLOW_NOT_FOUND, f"workflow {public!r} not found")
    return str(row["workflow_id"])


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode() + b"\n"


@dataclass(frozen=True)
class Written:
    """What an archive holds."""

    run_id: str
    namespace: str
    event_count: int


async def write_run(conn: AsyncConnection, key: str, out: IO[bytes]) -> Written:
    """Write the run keyed `key` to `out` as an archive (compressed). Read in one snapshot of
    its own (so an open run's archive is consistent too), or in the caller's transaction."""
    own = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    async with conn.transaction():
        if own:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        run = await fetch_one(conn, SELECT_RUN, [key])
        if run is None:
            raise errors.not_found(Reason.WORKFLOW_NOT_FOUND, "the run is gone")
        header: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        header["run"] = _to_file(run["row"])
        for name, query in SELECT_SIDE.items():
            header[name] = [_to_file(r["row"]) for r in await fetch_all(conn, query, [key])]
        digest = hashlib.sha256()
        count = 0
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
            for line in _lines(header, await fetch_all(conn, SELECT_EVENTS, [key])):
                digest.update(line)
                packed.write(line)
                count += 1
            packed.write(_line({"end": {"events": count - 1, "sha256": digest.hexdigest()}}))
    return Written(str(run["row"]["run_id"]), str(run["row"]["namespace"]), count - 1)


def _lines(header: dict[str, Any], events: list[dict[str, Any]]) -> Iterator[bytes]:
    yield _line(header)
    for event in events:
        stored = event["stored"]
        yield _line(
            {
                "event": _to_file(event["row"]),
                "payload_data": None if stored is None else base64.b64encode(stored).decode(),
            }
        )


async def export_run(conn: AsyncConnection, key: str) -> tuple[bytes, str, int]:
    """The archive of the run keyed `key`, its run id and event count."""
    buffer = io.BytesIO()
    written = await write_run(conn, key, buffer)
    return buffer.getvalue(), written.run_id, written.event_count


# --- import ---------------------------------------------------------------------------------


def _insert(table: str, columns: tuple[str, ...], in_run_part: bool = False) -> str:
    """The one INSERT of an archived row into `table`: every column from the row's JSON, and
    with `in_run_part` the journal partition of its run (the imported run takes the target's
    newest partition, as a start does: a partition is the target's, not archived)."""
    listed = ", ".join(columns)
    if not in_run_part:
        return (
            f"INSERT INTO history.{table} ({listed})"
            f" SELECT {listed} FROM jsonb_populate_record(NULL::history.{table}, %s::jsonb)"
        )
    return (
        f"INSERT INTO history.{table} ({listed}, part)"
        f" SELECT {', '.join(f'r.{column}' for column in columns)}, w.part"
        f" FROM jsonb_populate_record(NULL::history.{table}, %s::jsonb) r"
        " JOIN history.workflows w ON w.workflow_id = r.workflow_id"
    )


INSERT_RUN = _insert("workflows", RUN_COLUMNS)
INSERT_EVENT = _insert("events", EVENT_COLUMNS, in_run_part=True)
INSERT_SIDE = {
    name: _insert(name, columns, in_run_part=name == "signal_consumptions")
    for name, columns in SIDE_TABLES.items()
}
# A payload stored by content lives as long as the partitions of the runs naming it.
INSERT_PAYLOAD = f"""
INSERT INTO history.payloads (sha256, data, first_part, last_part)
SELECT %s, %s, part, part FROM history.workflows WHERE workflow_id = %s
{PAYLOAD_REFERENCED}"""
# The latest run of the chain, locked: an import and a start of the same id never interleave.
LOCK_CHAIN = "SELECT run_id FROM history.workflows WHERE workflow_id = %s FOR UPDATE"
RUN_OF_CHAIN = "SELECT 1 FROM history.workflows WHERE chain_id = %s AND run_id = %s"
RUN_ID_TAKEN = "SELECT 1 FROM history.workflows WHERE run_id = %s"


def _invalid(number: int, message: str) -> errors.ApiError:
    return errors.invalid_argument(f"archive line {number}: {message}")


def _read_lines(archive: bytes) -> list[bytes]:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(archive)) as unpacked:
            text = unpacked.read(MAX_UNPACKED_BYTES + 1)
    except (OSError, EOFError, ValueError) as exc:
        raise errors.invalid_argument(f"the archive is not gzip data: {exc}") from exc
    if len(text) > MAX_UNPACKED_BYTES:
        raise errors.invalid_argument(
            f"the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes, more than a run's "
            "archive holds"
        )
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) < 2:
        raise errors.invalid_argument("the archive has no header and trailer lines")
    return lines


def _object(number: int, line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise _invalid(number, f"not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise _invalid(number, "not a JSON object")
    return value


def _row(number: int, what: str, value: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    """An archived row, every column present and none else, bytea back to PostgreSQL's hex."""
    if not isinstance(value, dict):
        raise _invalid(number, f"{what} is not a JSON object")
    missing = [c for c in columns if c not in value]
    extra = sorted(set(value) - set(columns))
    if missing or extra:
        raise _invalid(number, f"{what} lacks {missing} or has unknown {extra}")
    row = {}
    for column in columns:
        cell = value[column]
        if column in BYTEA_COLUMNS and cell is not None:
            cell = "\\x" + _bytes(number, f"{what}.{column}", cell).hex()
        row[column] = cell
    return row


def _bytes(number: int, what: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise _invalid(number, f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _invalid(number, f"{what} is not base64 ({exc})") from exc


def _requalify(row: dict[str, Any], key: str, namespace: str) -> dict[str, Any]:
    """A row keyed by `key`, its qualified names in `namespace`."""
    moved = {**row, "workflow_id": key}
    for column in QUALIFIED_COLUMNS & set(row):
        if isinstance(row[column], str):
            moved[column] = namespaces.qualify(namespace, namespaces.split(row[column])[1])
    if "namespace" in row:
        moved["namespace"] = namespace
    return moved


@dataclass
class _Archive:
    """An archive read and checked line by line (nothing written yet)."""

    run: dict[str, Any]
    side: dict[str, list[dict[str, Any]]]
    events: list[tuple[int, dict[str, Any], bytes | None]]  # line number, row, stored payload


def _parse(archive: bytes) -> _Archive:
    lines = _read_lines(archive)
    header = _object(1, lines[0])
    if header.get("format") != FORMAT:
        raise _invalid(1, f"not a {FORMAT} archive (format {header.get('format')!r})")
    if header.get("version") != VERSION:
        raise _invalid(1, f"version {header.get('version')!r} is not {VERSION}, the one read")
    run = _row(1, "run", header.get("run"), RUN_COLUMNS)
    _check_identity(run)
    side = {}
    for name, columns in SIDE_TABLES.items():
        rows = header.get(name)
        if not isinstance(rows, list):
            raise _invalid(1, f"{name} is not a list")
        side[name] = [_row(1, name, r, columns) for r in rows]
    events: list[tuple[int, dict[str, Any], bytes | None]] = []
    for number, line in enumerate(lines[1:-1], start=2):
        value = _object(number, line)
        if set(value) != {"event", "payload_data"}:
            raise _invalid(number, "an event line has exactly `event` and `payload_data`")
        row = _row(number, "event", value["event"], EVENT_COLUMNS)
        if row["workflow_id"] != run["workflow_id"]:
            raise _invalid(number, "the event belongs to another run")
        if row["event_id"] != len(events) + 1:
            raise _invalid(number, f"event {row['event_id']!r} where {len(events) + 1} is due")
        stored = _stored(number, row, value["payload_data"])
        events.append((number, row, stored))
    _check_trailer(lines, len(events))
    if run["event_count"] != len(events):
        raise _invalid(
            1, f"the run counts {run['event_count']!r} events; the file has {len(events)}"
        )
    return _Archive(run, side, events)


def _check_identity(run: dict[str, Any]) -> None:
    """The header's ids and counts, of the types an import decides by."""
    for column in ("workflow_id", "chain_id", "run_id", "status"):
        if not isinstance(run[column], str) or not run[column]:
            raise _invalid(1, f"run.{column} is not a non-empty string")
    if not isinstance(run["next_run_id"], str | None):
        raise _invalid(1, "run.next_run_id is not a string or null")
    if not isinstance(run["event_count"], int):
        raise _invalid(1, "run.event_count is not an integer")
    public = namespaces.split(run["chain_id"])[1]
    if not public or public.startswith("@"):
        raise _invalid(1, f"run.chain_id {run['chain_id'][:70]!r} names no workflow id")


def _stored(number: int, row: dict[str, Any], data: Any) -> bytes | None:
    """A payload stored by content, checked against its digest."""
    if row["payload_sha256"] is None:
        if data is not None:
            raise _invalid(number, "payload_data without payload_sha256")
        return None
    stored = _bytes(number, "payload_data", data)
    if "\\x" + hashlib.sha256(stored).hexdigest() != row["payload_sha256"]:
        raise _invalid(number, "payload_data does not match payload_sha256")
    return stored


def _check_trailer(lines: list[bytes], events: int) -> None:
    number = len(lines)
    trailer = _object(number, lines[-1]).get("end")
    if not isinstance(trailer, dict) or trailer.get("events") != events:
        raise _invalid(
            number, f"the trailer does not count the {events} events before it (a file cut short?)"
        )
    digest = hashlib.sha256()
    for line in lines[:-1]:
        digest.update(line + b"\n")
    if trailer.get("sha256") != digest.hexdigest():
        raise _invalid(
            number, "the lines before the trailer do not match its sha256: the file was changed"
        )


async def import_run(conn: AsyncConnection, archive: bytes, namespace: str) -> Imported:
    """Restore a closed run from an archive into `namespace`, in one transaction: the chain's
    latest run when the workflow id has none in the namespace, an earlier run of it when the
    archived run's successor (next_run_id) is there; otherwise ALREADY_EXISTS."""
    parsed = _parse(archive)
    run = parsed.run
    public = namespaces.split(run["chain_id"])[1]
    if run["status"] in OPEN_STATUSES:
        raise errors.failed_precondition(
            Reason.WORKFLOW_OPEN,
            f"run {run['run_id']} of workflow {public!r} is {run['status']}: only a closed run "
            "is imported (export it again once it has closed)",
        )
    chain = namespaces.qualify(namespace, public)
    try:
        async with conn.transaction():
            key, earlier = await _place(conn, chain, run)
            await conn.execute(INSERT_RUN, [json.dumps(_requalify(run, key, namespace))])
            for number, row, stored in parsed.events:
                if stored is not None:
                    await conn.execute(
                        INSERT_PAYLOAD, [hashlib.sha256(stored).digest(), stored, key]
                    )
                await _insert_row(conn, number, INSERT_EVENT, _requalify(row, key, namespace))
            for name, rows in parsed.side.items():
                for row in rows:
                    await _insert_row(conn, 1, INSERT_SIDE[name], _requalify(row, key, namespace))
    except psycopg.errors.UniqueViolation as exc:
        raise _exists(public, run["run_id"]) from exc
    return Imported(public, run["run_id"], len(parsed.events), earlier)


async def _insert_row(conn: AsyncConnection, number: int, query: str, row: dict[str, Any]) -> None:
    try:
        await conn.execute(query, [json.dumps(row)])
    except psycopg.errors.UniqueViolation:
        raise  # the run is there already: import_run answers ALREADY_EXISTS
    except (psycopg.errors.DataError, psycopg.errors.IntegrityConstraintViolation) as exc:
        raise _invalid(number, f"the database refused a value: {exc.diag.message_primary}") from exc


async def _place(conn: AsyncConnection, chain: str, run: dict[str, Any]) -> tuple[str, bool]:
    """The key the imported run takes, and whether it is an earlier run of its chain."""
    if await fetch_one(conn, RUN_ID_TAKEN, [run["run_id"]]) is not None:
        raise _exists(namespaces.split(chain)[1], run["run_id"])
    if await fetch_one(conn, LOCK_CHAIN, [chain]) is None:
        return chain, False
    successor = run["next_run_id"]
    if successor and await fetch_one(conn, RUN_OF_CHAIN, [chain, successor]) is not None:
        return f"@~{run['run_id']}", True
    raise _exists(namespaces.split(chain)[1], run["run_id"])


def _exists(public: str, run_id: str) -> errors.ApiError:
    return errors.already_exists(
        Reason.WORKFLOW_ID_CONFLICT,
        f"workflow {public!r} already has a run in this namespace (or run {run_id} exists): "
        "an archived run is imported only where its workflow id is free, or before the run "
        "that continued it",
    )
