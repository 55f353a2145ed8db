"""`perdure keys create|revoke|list` and `perdure audit`: API keys and the audit log.

Through the gateway with an admin key (PERDURE_API_KEY), acting on its namespace; or, to make
the first key, straight in the database with `--database-url` (any namespace)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from psycopg import AsyncConnection

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.cli.flags import add_gateway_flags, add_gateway_flags_to_subcommands, api_key
from perdure.common import errors, namespaces
from perdure.history import keys
from perdure.telemetry.rpc import sync_channel

ROLES = ("reader", "operator", "admin", "worker")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `keys` and `audit`."""
    parser = subparsers.add_parser("keys", help="create, revoke and list API keys")
    add_gateway_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a key; its token is shown once")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument(
        "--queue",
        action="append",
        default=[],
        dest="task_queues",
        help="a worker key's task queue (repeatable; '*' for all of its namespace)",
    )
    create.add_argument("--name", default="", help="a label for people")
    revoke = commands.add_parser("revoke", help="revoke a key: it stops working at once")
    revoke.add_argument("key_id")
    listing = commands.add_parser("list", help="list the namespace's keys (never their tokens)")
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    audit = subparsers.add_parser("audit", help="the namespace's audit log, newest first")
    audit.add_argument("--limit", type=int, default=100, help="at most this many (max 1000)")
    audit.set_defaults(command="audit")
    add_gateway_flags_to_subcommands(commands)
    add_gateway_flags(audit)
    for command in (create, revoke, listing, audit):
        command.add_argument(
            "--database-url",
            default=None,
            help="act straight in history's database instead of through the gateway (to make "
            "the first admin key; needs no key, and --namespace may name any namespace)",
        )


def run(args: argparse.Namespace) -> int:
    """Execute a `keys` or `audit` command; return the exit code."""
    try:
        direct = bool(args.database_url)
        answer = asyncio.run(_in_database(args)) if direct else _through_gateway(args)
    except errors.ApiError as error:
        print(f"error: {error.message} ({error.reason})", file=sys.stderr)
        return 1
    if isinstance(answer, admin.CreateApiKeyResponse):
        # The token alone on stdout, for `export PERDURE_API_KEY=$(perdure keys create ...)`.
        _print(answer.key, file=sys.stderr)
        print(
            "Keep the token now: only its hash is stored, it cannot be shown again.",
            file=sys.stderr,
        )
        print(answer.token)
        return 0
    _print(answer)
    return 0


def _through_gateway(args: argparse.Namespace) -> Message:
    token = api_key()
    if token is None:
        raise errors.ApiError(
            grpc.StatusCode.UNAUTHENTICATED,
            "API_KEY_MISSING",
            "set PERDURE_API_KEY to an admin key (or use --database-url to make the first one)",
        )
    with sync_channel(args.address, api_key=token) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        answer: Message
        if args.command == "create":
            answer = stub.CreateApiKey(_create_request(args), timeout=30)
        elif args.command == "revoke":
            answer = stub.RevokeApiKey(admin.RevokeApiKeyRequest(key_id=args.key_id), timeout=30)
        elif args.command == "list":
            answer = stub.ListApiKeys(
                admin.ListApiKeysRequest(include_revoked=args.all), timeout=30
            )
        else:
            answer = stub.ListAuditEvents(
                admin.ListAuditEventsRequest(page_size=args.limit), timeout=30
            )
        return answer


async def _in_database(args: argparse.Namespace) -> Message:
    namespace = namespaces.resolve(args.namespace)
    async with await AsyncConnection.connect(args.database_url, autocommit=True) as conn:
        if args.command == "create":
            request = _create_request(args)
            key, token = await keys.create(
                conn, namespace, keys.role_of(request.role), args.task_queues, args.name, ""
            )
            return admin.CreateApiKeyResponse(key=key, token=token)
        if args.command == "revoke":
            revoked = await keys.revoke(conn, namespace, args.key_id, "")
            return admin.RevokeApiKeyResponse(revoked=revoked)
        if args.command == "list":
            return admin.ListApiKeysResponse(keys=await keys.listed(conn, namespace, args.all))
        events, next_token = await keys.audit_page(conn, namespace, min(args.limit, 1000), "")
        return admin.ListAuditEventsResponse(events=events, next_page_token=next_token)


def create_in_database(
    dsn: str, role: str, task_queues: list[str], name: str, namespace: str = "default"
) -> str:
    """A new key made straight in history's database (the first admin key, `perdure dev`'s
    keys, a benchmark's); returns its token."""

    async def create() -> str:
        async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
            _, token = await keys.create(conn, namespace, role.upper(), task_queues, name, "")
            return token

    return asyncio.run(create())


def _create_request(args: argparse.Namespace) -> admin.CreateApiKeyRequest:
    role: Any = f"ROLE_{args.role.upper()}"
    return admin.CreateApiKeyRequest(role=role, task_queues=args.task_queues, name=args.name)


def _print(message: Message, file: TextIO = sys.stdout) -> None:
    print(json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2), file=file)
