"""API keys (stored hashed) and the audit log: SQL and rules, on any connection, so that the
command line can make the first key straight in the database."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors
from perdure.common.auth import (
    Principal,
    RememberedKeys,
    digest_matches,
    new_token,
    parse_token,
    secret_digest,
    unauthenticated,
)
from perdure.common.convert import python_to_value, timestamp
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.common.reasons import Reason
from perdure.common.text import require_storable
from perdure.history.rows import fetch_all, fetch_one

MAX_NAME_LENGTH = 200
MAX_QUEUES = 100
QUEUE_NAME_LENGTH = 200
_COLUMNS = "key_id, namespace, role, task_queues, name, created_by, created_at, revoked_at"
ROLES = ("READER", "OPERATOR", "ADMIN", "WORKER")


def role_of(value: int) -> str:
    """A Role as stored; INVALID_ARGUMENT when it is not one."""
    name = admin.Role.Name(value).removeprefix("ROLE_") if value in admin.Role.values() else ""
    if name not in ROLES:
        raise errors.invalid_argument("role is required: reader, operator, admin or worker")
    return name


def validate_new_key(role: str, task_queues: list[str], name: str) -> None:
    """A worker key names its queues ("*" for all); other keys name none."""
    if len(name) > MAX_NAME_LENGTH:
        raise errors.invalid_argument(f"name is longer than {MAX_NAME_LENGTH} characters")
    require_storable("name", name)
    if role != "WORKER":
        if task_queues:
            raise errors.invalid_argument("only worker keys have task_queues")
        return
    if not task_queues:
        raise errors.invalid_argument(
            "a worker key needs task_queues: the queues it may serve, or '*' for all"
        )
    if len(task_queues) > MAX_QUEUES:
        raise errors.invalid_argument(f"a key names at most {MAX_QUEUES} task queues")
    for queue in task_queues:
        if not queue or len(queue) > QUEUE_NAME_LENGTH or queue.startswith("@"):
            raise errors.invalid_argument(f"task queue {queue[:50]!r} is not a queue name")
        require_storable("task_queues", queue)


async def create(
    conn: AsyncConnection,
    namespace: str,
    role: str,
    task_queues: list[str],
    name: str,
    created_by: str,
) -> tuple[admin.ApiKey, str]:
    """A new key and its token (never stored), audited in the same transaction."""
    validate_new_key(role, task_queues, name)
    key_id, token = new_token()
    async with conn.transaction():
        row = await fetch_one(
            conn,
            f"""INSERT INTO history.api_keys
                    (key_id, secret_sha256, namespace, role, task_queues, name, created_by)
                VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}""",
            (key_id, secret_digest(token), namespace, role, task_queues, name, created_by),
        )
        details = {"role": role.lower(), "name": name, "task_queues": task_queues}
        await audit(conn, created_by, namespace, "API_KEY_CREATED", key_id, details)
    assert row is not None
    return api_key(row), token


async def revoke(conn: AsyncConnection, namespace: str, key_id: str, revoked_by: str) -> bool:
    """Revoke a key of the namespace; False when it already was."""
    async with conn.transaction():
        row = await fetch_one(
            conn,
            """UPDATE history.api_keys SET revoked_at = now()
               WHERE key_id = %s AND namespace = %s AND revoked_at IS NULL RETURNING key_id""",
            (key_id, namespace),
        )
        if row is not None:
            await audit(conn, revoked_by, namespace, "API_KEY_REVOKED", key_id, {})
            return True
    existing = await fetch_one(
        conn,
        "SELECT 1 FROM history.api_keys WHERE key_id = %s AND namespace = %s",
        (key_id, namespace),
    )
    if existing is None:
        raise errors.not_found(
            Reason.API_KEY_NOT_FOUND, f"namespace {namespace!r} has no API key {key_id!r}"
        )
    return False


async def listed(
    conn: AsyncConnection, namespace: str, include_revoked: bool
) -> list[admin.ApiKey]:
    """The namespace's keys, newest first."""
    rows = await fetch_all(
        conn,
        f"""SELECT {_COLUMNS} FROM history.api_keys
            WHERE namespace = %s AND (%s OR revoked_at IS NULL)
            ORDER BY created_at DESC, key_id""",
        (namespace, include_revoked),
    )
    return [api_key(row) for row in rows]


async def verify(conn: AsyncConnection, token: str) -> Principal:
    """The key a token proves; UNAUTHENTICATED when it proves none."""
    key_id, _ = parse_token(token)
    row = await fetch_one(
        conn,
        "SELECT secret_sha256, namespace, role, task_queues, revoked_at"
        " FROM history.api_keys WHERE key_id = %s",
        (key_id,),
    )
    if row is None or not digest_matches(token, bytes(row["secret_sha256"])):
        raise unauthenticated(Reason.API_KEY_INVALID, "the API key is not valid")
    if row["revoked_at"] is not None:
        raise unauthenticated(Reason.API_KEY_REVOKED, f"API key {key_id} has been revoked")
    return Principal(
        key_id=key_id,
        namespace=row["namespace"],
        role=admin.Role.Value(f"ROLE_{row['role']}"),
        task_queues=tuple(row["task_queues"]),
    )


async def audit(
    conn: AsyncConnection,
    key_id: str,
    namespace: str,
    action: str,
    target: str,
    details: dict[str, Any],
) -> None:
    """Append one administrative action to the log."""
    await conn.execute(
        "INSERT INTO history.audit_log (key_id, namespace, action, target, details)"
        " VALUES (%s, %s, %s, %s, %s)",
        (key_id, namespace, action, target, Jsonb(details)),
    )


async def audit_page(
    conn: AsyncConnection, namespace: str, size: int, token: str
) -> tuple[list[admin.AuditEvent], str]:
    """One page of the namespace's audit log, newest first, and the next page's token."""
    before = decode_page_token(token)
    rows = await fetch_all(
        conn,
        """SELECT id, at, key_id, namespace, action, target, details FROM history.audit_log
           WHERE namespace = %s AND (%s::bigint IS NULL OR id < %s)
           ORDER BY id DESC LIMIT %s""",
        (namespace, before, before, size + 1),
    )
    more = len(rows) > size
    rows = rows[:size]
    events = [
        admin.AuditEvent(
            id=row["id"],
            time=timestamp(row["at"]),
            key_id=row["key_id"],
            namespace=row["namespace"],
            action=row["action"],
            target=row["target"],
            details=python_to_value(row["details"]).struct_value,
        )
        for row in rows
    ]
    next_token = encode_page_token(rows[-1]["id"]) if more else ""
    return events, next_token


def api_key(row: dict[str, Any]) -> admin.ApiKey:
    """A row of api_keys as ApiKey."""
    return admin.ApiKey(
        key_id=row["key_id"],
        namespace=row["namespace"],
        role=f"ROLE_{row['role']}",
        task_queues=row["task_queues"],
        name=row["name"],
        create_time=timestamp(row["created_at"]),
        revoke_time=timestamp(row["revoked_at"]),
        created_by=row["created_by"],
    )


class KeyRing(RememberedKeys):
    """Token checks for this history process, by its database (remembered: RememberedKeys),
    and the connections key management uses."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        super().__init__(self._verify)
        self._pool = pool

    async def _verify(self, token: str) -> Principal:
        async with self._pool.connection() as conn:
            return await verify(conn, token)

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection of the pool, for key management."""
        return self._pool.connection()
