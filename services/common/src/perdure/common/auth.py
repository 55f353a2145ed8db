"""API keys: bearer tokens in gRPC metadata, what a verified one proves (a Principal), and the
namespace a call acts in. The server interceptor that checks them is perdure.common.guard.

A token is `prd_<key_id>_<secret>`. The key id is public (it names the key in lists and the
audit log); the secret is 32 random bytes, stored only as its SHA-256: a token that random
cannot be guessed from its hash, so a slow password hash would add latency and no safety.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.common import errors, namespaces
from perdure.common.reasons import Reason
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc

log = logging.getLogger(__name__)

TOKEN_PREFIX = "prd_"
ALL_QUEUES = "*"
# Callers with more rights include the lesser roles: an operator may do what a reader may.
_INCLUDES: dict[int, set[int]] = {
    admin.ROLE_READER: {admin.ROLE_READER, admin.ROLE_OPERATOR, admin.ROLE_ADMIN},
    admin.ROLE_OPERATOR: {admin.ROLE_OPERATOR, admin.ROLE_ADMIN},
    admin.ROLE_ADMIN: {admin.ROLE_ADMIN},
    admin.ROLE_WORKER: {admin.ROLE_WORKER},
}


def auth_enabled() -> bool:
    """PERDURE_AUTH=on (the default) or off. Off is for local development only: anyone who
    reaches a port can do anything, and every service says so loudly at start."""
    setting = os.environ.get("PERDURE_AUTH", "on").strip().lower()
    if setting not in ("on", "off"):
        raise SystemExit(f"PERDURE_AUTH must be on or off, not {setting!r}")
    return setting == "on"


def warn_if_open(service: str) -> None:
    """Log, at start, that authentication is off."""
    if not auth_enabled():
        log.warning(
            "%s: AUTHENTICATION IS OFF (PERDURE_AUTH=off): anyone who can reach this port can "
            "read and change every workflow; never run like this outside a laptop",
            service,
        )


@dataclass(frozen=True)
class Principal:
    """Who a verified token belongs to."""

    key_id: str
    namespace: str
    role: int  # an admin.Role value
    task_queues: tuple[str, ...] = field(default=())

    def serves(self, task_queue: str) -> bool:
        """Whether a worker key may take this queue's tasks."""
        return ALL_QUEUES in self.task_queues or task_queue in self.task_queues


current_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "perdure_principal", default=None
)


def new_token() -> tuple[str, str]:
    """A fresh key id and its token."""
    key_id = secrets.token_hex(6)
    return key_id, f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def parse_token(token: str) -> tuple[str, str]:
    """The key id and secret of a token; UNAUTHENTICATED when it is not one."""
    key_id, _, secret = token.removeprefix(TOKEN_PREFIX).partition("_")
    if not token.startswith(TOKEN_PREFIX) or not key_id or not secret:
        raise unauthenticated(
            Reason.API_KEY_INVALID, "the bearer token is not a Perdure API key (prd_<id>_<secret>)"
        )
    return key_id, secret


def secret_digest(token: str) -> bytes:
    """What is stored of a token: the SHA-256 of its secret."""
    return hashlib.sha256(parse_token(token)[1].encode()).digest()


def digest_matches(token: str, stored: bytes) -> bool:
    """Compare in constant time."""
    return hmac.compare_digest(secret_digest(token), stored)


def unauthenticated(reason: str, message: str) -> errors.ApiError:
    """No valid credentials."""
    return errors.ApiError(grpc.StatusCode.UNAUTHENTICATED, reason, message)


def permission_denied(message: str) -> errors.ApiError:
    """Valid credentials that do not allow this call."""
    return errors.ApiError(grpc.StatusCode.PERMISSION_DENIED, Reason.PERMISSION_DENIED, message)


def role_allows(role: int, needed: int) -> bool:
    """Whether a key of `role` may make a call that needs `needed`."""
    return role in _INCLUDES[needed]


def role_name(role: int) -> str:
    """reader, operator, admin or worker."""
    return admin.Role.Name(role).removeprefix("ROLE_").lower()


def bearer_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying a token."""
    return (("authorization", f"Bearer {token}"),)


def bearer_token(metadata: Any) -> str | None:
    """The token of an `authorization: Bearer <token>` entry, if any."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def require_namespace(namespace: str) -> None:
    """Refuse a workflow outside the caller's namespace (when a key is in force)."""
    principal = current_principal.get()
    if principal is not None and principal.namespace != namespace:
        raise permission_denied(
            f"API key {principal.key_id} belongs to namespace {principal.namespace!r}; it "
            f"cannot reach namespace {namespace!r}"
        )


Authenticate = Callable[[str], Awaitable[Principal]]
CHECK_TIMEOUT = 10.0


# How long a process trusts a key it verified: gateway and scheduler remember history's answer,
# history its database's, each this long from when it asked, so a key revoked elsewhere
# (another replica, the CLI's --database-url) is refused everywhere within twice this; the
# process a revocation passes through forgets the key at once.
REMEMBER_SECONDS = 0.5


@dataclass(frozen=True)
class _Verified:
    principal: Principal
    asked_at: float  # the clock when the check that verified it was asked


class RememberedKeys:
    """Token checks by `check`, a verified key remembered for REMEMBER_SECONDS: calls come at
    step rate and each would otherwise cost a lookup (a query, or a call to history).

    A call in the second half of a memory's life is answered from it and checks the key again
    beside it (one check per key at a time), so a key in steady use is never waited for after
    its first check; a key that check refuses is forgotten, and its next call is refused."""

    MAX_ENTRIES = 10_000

    def __init__(
        self,
        check: Authenticate,
        seconds: float = REMEMBER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self._seconds = seconds
        self._clock = clock
        self._verified: dict[str, _Verified] = {}
        self._rechecks: dict[str, asyncio.Task[None]] = {}
        self._forgets = 0  # a check asked before a forget() remembers nothing

    async def authenticate(self, token: str) -> Principal:
        """The key a token proves; UNAUTHENTICATED (from `check`) when it proves none."""
        known = self._verified.get(token)
        if known is not None:
            age = self._clock() - known.asked_at
            if age < self._seconds:
                if age >= self._seconds / 2 and token not in self._rechecks:
                    self._recheck_beside(token)
                return known.principal
        return await self._ask(token)

    def forget(self, key_id: str) -> None:
        """Drop a revoked key's remembered checks, and what checks under way would remember."""
        self._forgets += 1
        for token, known in list(self._verified.items()):
            if known.principal.key_id == key_id:
                del self._verified[token]

    async def _ask(self, token: str) -> Principal:
        asked_at, forgets = self._clock(), self._forgets
        principal = await self._check(token)
        if forgets == self._forgets:
            if len(self._verified) >= self.MAX_ENTRIES:
                self._verified.clear()  # bounded, whatever tokens callers invent
            self._verified[token] = _Verified(principal, asked_at)
        return principal

    def _recheck_beside(self, token: str) -> None:
        recheck = asyncio.create_task(self._recheck(token), name="API key recheck")
        self._rechecks[token] = recheck
        recheck.add_done_callback(lambda _: self._rechecks.pop(token, None))

    async def _recheck(self, token: str) -> None:
        try:
            await self._ask(token)
        except Exception as error:
            if refusal(error) is not None:
                self._verified.pop(token, None)  # the next call asks, and is told
            else:  # the memory stands until it expires, as it would have without the recheck
                log.warning("could not check an API key again: %s", error)


def refusal(error: Exception) -> str | None:
    """What a token check's error says when it says the token proves no key (its message);
    None when it says only that nobody could tell (history or the database unreachable)."""
    if isinstance(error, errors.ApiError) and error.code == grpc.StatusCode.UNAUTHENTICATED:
        return error.message
    if isinstance(error, grpc.aio.AioRpcError) and error.code() == grpc.StatusCode.UNAUTHENTICATED:
        return error.details() or ""
    return None


def history_authenticator(history: hgrpc.HistoryServiceStub) -> Authenticate:
    """Token checks by history, which keeps the keys (gateway and scheduler use this)."""

    async def authenticate(token: str) -> Principal:
        proof = await history.Authenticate(
            hpb.AuthenticateRequest(token=token), timeout=CHECK_TIMEOUT
        )
        return Principal(proof.key_id, proof.namespace, proof.role, tuple(proof.task_queues))

    return authenticate


def acting_namespace(requested: str) -> str:
    """The namespace a call acts in: its key's (naming another is refused), or the one it
    names (`default` when none) when no key is in force."""
    principal = current_principal.get()
    if principal is None:
        return namespaces.resolve(requested)
    if requested and requested != principal.namespace:
        raise permission_denied(
            f"API key {principal.key_id} belongs to namespace {principal.namespace!r}; it "
            f"cannot reach namespace {requested[:70]!r}"
        )
    return principal.namespace
