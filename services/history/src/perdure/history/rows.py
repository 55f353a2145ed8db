"""Running history's statements and reading their rows: rows as dicts, payload columns."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common.payload import null_payload

Row = dict[str, Any]


def json_or_none(value: Any) -> Jsonb | None:
    """Wrap a value for a jsonb column; None stays SQL NULL."""
    return None if value is None else Jsonb(value)


async def fetch_one(conn: AsyncConnection, query: str, params: Any) -> Row | None:
    """Run a query and return its first row as a dict, or None."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone()


async def fetch_all(conn: AsyncConnection, query: str, params: Any) -> list[Row]:
    """Run a query and return every row as a dict."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


def payload_of(row: Row, column: str) -> Payload | None:
    """The payload stored in `column` and `<column>_encoding` of a row (SQL NULL: None), its
    bytes as they were written."""
    data = row[column]
    if data is None:
        return None
    return Payload(encoding=row[f"{column}_encoding"], data=bytes(data))


def payload_in(row: Row, column: str) -> Payload:
    """The payload of a column that always holds one (JSON null if it is SQL NULL)."""
    payload = payload_of(row, column)
    return payload if payload is not None else null_payload()


def payload_columns(column: str, payload: Payload | None) -> dict[str, Any]:
    """The parameters `column` and `<column>_encoding` for a payload (None: SQL NULL)."""
    if payload is None:
        return {column: None, f"{column}_encoding": None}
    return {column: payload.data, f"{column}_encoding": payload.encoding}
