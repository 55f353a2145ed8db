"""Sending the report exactly once: an idempotency-key reservation in front of a mail provider.

A step runs at least once: a worker can die after the effect and before the journal records
the step, and the next worker runs the step again. For a model call that costs a little; for
an email it means the reader gets it twice. This module makes the notification effectively
once with two tables in a small SQLite database (path: `PERDURE_EXAMPLE_DB`, default
`.perdure/research_agent.sqlite3`):

- `reservations` is ours: one row per idempotency key (the step's key,
  `<workflow id>:notify`), with `state` `reserved` or `sent`, the provider's message id once
  known, and the highest fencing token that touched it.
- `delivered` stands for the mail provider: what landed in the reader's inbox. Like real mail
  and payment APIs it takes an idempotency key and keeps it unique: a second send with the same
  key delivers nothing and answers with the first message's id.

`send_once` runs three separate transactions, as it would against a real provider (which
shares no transaction with us):

1. **reserve**: insert the reservation as `reserved` (or find the existing one). If it is
   already `sent`, return the recorded message id: nothing is sent.
2. **send**: hand the message to the provider with the idempotency key.
3. **mark sent**: set the reservation to `sent` with the message id.

Why a replay after a crash delivers nothing twice, wherever the crash falls:

- before 1 or between 1 and 2: nothing was sent; the replay reserves (or finds `reserved`) and
  sends once.
- between 2 and 3 (sent, not marked): the replay finds `reserved`, so it cannot know whether
  the send happened and sends again, *with the same key*; the provider drops the duplicate and
  returns the original message id, which is then marked `sent`. (With a provider that takes no
  key, this is where you would ask the provider, or stop for a human, instead of sending.)
- between 3 and the journal record of the step (the `crash_after_notification` switch of the
  example): the replay finds `sent` and returns the recorded message id without calling the
  provider at all.

The key is the same on every run of the step because it is derived from the workflow id and the
step id, never from an attempt or a worker. The fence adds one more guard: a worker whose lease
was taken over (a lower fence than the reservation has seen) is refused, so a paused worker
that wakes up late cannot race the worker that replaced it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

DB_ENV = "PERDURE_EXAMPLE_DB"
DEFAULT_DB = Path(".perdure") / "research_agent.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reservations (
    idempotency_key TEXT PRIMARY KEY,
    workflow_id     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('reserved', 'sent')),
    fence           INTEGER NOT NULL,
    message_id      INTEGER,
    reserved_at     TEXT NOT NULL,
    sent_at         TEXT
);
CREATE TABLE IF NOT EXISTS delivered (
    message_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    workflow_id     TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    delivered_at    TEXT NOT NULL
);
"""


class StaleFenceError(Exception):
    """A newer holder of the workflow (a higher fence) already touched this reservation."""


@dataclass(frozen=True)
class Notification:
    """One message the mail provider delivered."""

    message_id: int
    idempotency_key: str
    workflow_id: str
    recipient: str
    subject: str
    body: str
    delivered_at: str


@dataclass(frozen=True)
class SendOutcome:
    """What `send_once` did: `sent_now` is True only when this call delivered the message."""

    message_id: int
    sent_now: bool
    found: str  # the reservation before this call: "none", "reserved" or "sent"


def database_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The database file: `path`, else $PERDURE_EXAMPLE_DB, else .perdure/research_agent..."""
    return Path(path or os.environ.get(DB_ENV) or DEFAULT_DB)


@contextmanager
def _connect(path: str | os.PathLike[str] | None) -> Iterator[sqlite3.Connection]:
    file = database_path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    # Autocommit mode: every transaction below is explicit (BEGIN IMMEDIATE ... COMMIT).
    with closing(sqlite3.connect(file, timeout=30, isolation_level=None)) as conn:
        conn.row_factory = sqlite3.Row
        conn.executescript(_SCHEMA)
        yield conn


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")  # take the write lock now: no lost update between workers
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _reserve(conn: sqlite3.Connection, key: str, workflow_id: str, fence: int) -> sqlite3.Row:
    """Step 1: hold the reservation with our fence; return it with `found`, its state before
    this call ("none" if it did not exist)."""
    with _transaction(conn):
        before = conn.execute(
            "SELECT state, fence FROM reservations WHERE idempotency_key = ?", (key,)
        ).fetchone()
        if before is None:
            conn.execute(
                "INSERT INTO reservations (idempotency_key, workflow_id, state, fence, reserved_at)"
                " VALUES (?, ?, 'reserved', ?, ?)",
                (key, workflow_id, fence, _now()),
            )
        elif before["fence"] > fence:
            raise StaleFenceError(
                f"reservation {key!r} is held with fence {before['fence']}; ours is {fence}"
            )
        else:
            conn.execute(
                "UPDATE reservations SET fence = ? WHERE idempotency_key = ?", (fence, key)
            )
        row: sqlite3.Row = conn.execute(
            "SELECT *, ? AS found FROM reservations WHERE idempotency_key = ?",
            ("none" if before is None else before["state"], key),
        ).fetchone()
    return row


def _provider_send(
    conn: sqlite3.Connection,
    key: str,
    workflow_id: str,
    recipient: str,
    subject: str,
    body: str,
) -> tuple[int, bool]:
    """Step 2, the mail provider's side: deliver unless the key was seen; (message id, new)."""
    with _transaction(conn):
        inserted = conn.execute(
            "INSERT INTO delivered (idempotency_key, workflow_id, recipient, subject, body,"
            " delivered_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
            (key, workflow_id, recipient, subject, body, _now()),
        ).rowcount
        (message_id,) = conn.execute(
            "SELECT message_id FROM delivered WHERE idempotency_key = ?", (key,)
        ).fetchone()
    return int(message_id), inserted == 1


def _mark_sent(conn: sqlite3.Connection, key: str, fence: int, message_id: int) -> None:
    """Step 3: the reservation becomes `sent` (unless a newer holder took it over meanwhile)."""
    with _transaction(conn):
        conn.execute(
            "UPDATE reservations SET state = 'sent', message_id = ?, sent_at = ?"
            " WHERE idempotency_key = ? AND fence <= ?",
            (message_id, _now(), key, fence),
        )


def send_once(
    *,
    idempotency_key: str,
    workflow_id: str,
    fence: int,
    recipient: str,
    subject: str,
    body: str,
    path: str | os.PathLike[str] | None = None,
) -> SendOutcome:
    """Deliver the message at most once per idempotency key: reserve, send, mark sent."""
    with _connect(path) as conn:
        reservation = _reserve(conn, idempotency_key, workflow_id, fence)
        if reservation["state"] == "sent":
            return SendOutcome(int(reservation["message_id"]), sent_now=False, found="sent")
        message_id, sent_now = _provider_send(
            conn, idempotency_key, workflow_id, recipient, subject, body
        )
        _mark_sent(conn, idempotency_key, fence, message_id)
        return SendOutcome(message_id, sent_now=sent_now, found=str(reservation["found"]))


def delivered_notifications(
    workflow_id: str | None = None, path: str | os.PathLike[str] | None = None
) -> list[Notification]:
    """The messages the provider delivered (for one workflow, or all), oldest first."""
    query = "SELECT * FROM delivered"
    params: tuple[str, ...] = ()
    if workflow_id is not None:
        query += " WHERE workflow_id = ?"
        params = (workflow_id,)
    with _connect(path) as conn:
        rows = conn.execute(query + " ORDER BY message_id", params).fetchall()
    return [Notification(**dict(row)) for row in rows]


def count_delivered(workflow_id: str, path: str | os.PathLike[str] | None = None) -> int:
    """How many messages the provider delivered for the workflow."""
    return len(delivered_notifications(workflow_id, path))


def reservation_state(
    idempotency_key: str, path: str | os.PathLike[str] | None = None
) -> str | None:
    """`reserved`, `sent`, or None when the key was never reserved."""
    with _connect(path) as conn:
        row = conn.execute(
            "SELECT state FROM reservations WHERE idempotency_key = ?", (idempotency_key,)
        ).fetchone()
    return None if row is None else str(row["state"])
