"""The purchasing agent's outside world, offline: vendors that quote prices, a bank that holds
and releases funds, and vendors that take and cancel orders and book deliveries.

Every effect is idempotent by key, as real payment and order APIs are: each is one row of
`supplier_effects` (in the examples' SQLite database, `PERDURE_EXAMPLE_DB`), unique by its
idempotency key (the step's, `<workflow id>:<step id>`), so a step that runs again after a crash
changes nothing the second time. The rows keep the order the effects happened in: what a saga's
compensations undid, and in which order, can be read back (`effects`).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime

from examples.research_agent.notifications import database_path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS supplier_effects (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    workflow_id     TEXT NOT NULL,
    action          TEXT NOT NULL,
    detail          TEXT NOT NULL,
    applied_at      TEXT NOT NULL
);
"""
# The price range of the offline vendors' quotes, in millionths of a currency unit.
_LOWEST_PRICE = 900_000_000
_PRICE_SPREAD = 400_000_000


class DeliveryUnavailableError(Exception):
    """No carrier can deliver the order (the example's switch `fail_delivery`)."""


DeliveryUnavailableError.__name__ = "DeliveryUnavailable"


@contextmanager
def _connect(path: str | os.PathLike[str] | None) -> Iterator[sqlite3.Connection]:
    file = database_path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(file, timeout=30, isolation_level=None)) as conn:
        conn.executescript(_SCHEMA)
        yield conn


def quote(vendor: str, item: str) -> int:
    """A vendor's price for `item`, in micros: the same every time it is asked."""
    digest = hashlib.sha256(f"{vendor}\n{item}".encode()).digest()
    return _LOWEST_PRICE + int.from_bytes(digest[:8], "big") % _PRICE_SPREAD


def apply(
    idempotency_key: str,
    workflow_id: str,
    action: str,
    detail: str,
    path: str | os.PathLike[str] | None = None,
) -> bool:
    """Do `action` once per key; True if it happened now, False if the key had done it."""
    with _connect(path) as conn:
        cursor = conn.execute(
            "INSERT INTO supplier_effects (idempotency_key, workflow_id, action, detail, "
            "applied_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
            (idempotency_key, workflow_id, action, detail, datetime.now(UTC).isoformat()),
        )
        return cursor.rowcount == 1


def effects(workflow_id: str, path: str | os.PathLike[str] | None = None) -> list[str]:
    """The actions done for a run, in the order they happened."""
    with _connect(path) as conn:
        rows = conn.execute(
            "SELECT action FROM supplier_effects WHERE workflow_id = ? ORDER BY seq",
            (workflow_id,),
        ).fetchall()
    return [str(row[0]) for row in rows]
