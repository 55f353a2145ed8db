"""Commits the synchronous standby has not confirmed.

With synchronous replication a commit waits until the standby has the transaction. If that
wait is cancelled (a cancel request: a call given up, statement_timeout, pg_cancel_backend),
PostgreSQL keeps the transaction committed on the primary, answers COMMIT with success and a
WARNING ("canceling wait for synchronous replication ... The transaction has already committed
locally, but might not have been replicated to the standby"). A failover then loses it: such a
commit must never be acknowledged. The pool's connections note the warning (see db._Pool),
the call fails with UnconfirmedCommit (UNAVAILABLE, so it is retried) and the pool confirms
that the standby caught up before it serves anyone again.
"""

from __future__ import annotations

import psycopg
from psycopg import AsyncConnection
from psycopg.errors import Diagnostic
from psycopg.rows import TupleRow

# The starts of the two WARNINGs PostgreSQL (13 to 18) sends when a commit stops waiting for
# the standby: on a cancel request, and on a terminated backend (whose connection then closes
# anyway). Matched on the text: the server's lc_messages must be English (C, en_*).
_UNCONFIRMED_WARNINGS = (
    "canceling wait for synchronous replication",
    "canceling the wait for synchronous replication",
)

# A statement that commits a transaction writing WAL of its own (a transactional message to
# the WAL, which nothing reads, allowed to any role): its commit waits for the standby to
# confirm the WAL up to it, hence every commit before it on this server. (A transaction that
# only takes an id, pg_current_xact_id(), writes no WAL before its commit and does not wait.)
CONFIRM_STATEMENT = "SELECT pg_logical_emit_message(true, 'perdure', 'confirm')"


class UnconfirmedCommit(psycopg.OperationalError):
    """A commit the primary made but the synchronous standby did not confirm."""


class WatchedConnection(AsyncConnection[TupleRow]):
    """A connection that remembers a commit whose wait for the standby was cancelled."""

    unconfirmed: str = ""


def watch_commits(conn: WatchedConnection) -> None:
    """Note on `conn` every commit its server reports as not confirmed by the standby."""

    def noticed(diagnostic: Diagnostic) -> None:
        message = diagnostic.message_primary or ""
        if diagnostic.severity_nonlocalized == "WARNING" and message.startswith(
            _UNCONFIRMED_WARNINGS
        ):
            conn.unconfirmed = message

    conn.add_notice_handler(noticed)


def take_unconfirmed(conn: WatchedConnection) -> UnconfirmedCommit | None:
    """The error for the unconfirmed commit `conn` saw since the last call, if any."""
    message, conn.unconfirmed = conn.unconfirmed, ""
    if not message:
        return None
    return UnconfirmedCommit(
        "a commit was not confirmed by the synchronous standby "
        f"(the database said: {message}); it may be lost in a failover"
    )
