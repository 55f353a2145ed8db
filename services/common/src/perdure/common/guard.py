"""Who may call what, checked before any handler runs: the one server interceptor of every
Perdure service when API keys are on.

Every service a server holds is in one class, and a call no class admits is refused (default
deny):

- **open**: health checks and reflection (`grpcurl list`), for probes and operators;
- **internal**: every service of the `perdure.internal` package, by its name alone, so a
  service added there later cannot be left open: only a proven Perdure service may call it
  (`service_identity`), and the caller it vouches for becomes the call's principal;
- **keyed**: the public and worker services named in `roles`, each method with the least
  role it needs, checked against the `authorization: Bearer` API key.

Bad credentials are cheap: a token refused once is refused again without a lookup, and an
address that keeps failing is refused before its next lookup (`FailedCredentials`). Each key
holds at most PERDURE_SESSIONS_PER_KEY streams of a kind open, and its streams check it again
every RECHECK_SECONDS and end with UNAUTHENTICATED (`API_KEY_REVOKED`) once it is revoked.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from perdure.common import errors
from perdure.common.auth import (
    Authenticate,
    Principal,
    auth_enabled,
    bearer_token,
    current_principal,
    permission_denied,
    refusal,
    role_allows,
    role_name,
    unauthenticated,
)
from perdure.common.limits import (
    WATCH_METHODS,
    OpenCap,
    TokenBucket,
    exhausted,
    sessions_per_key,
    watches_per_key,
)
from perdure.common.reasons import Reason
from perdure.common.service_identity import (
    CLIENT_ADDRESS_HEADER,
    SECRET_HEADER,
    ServiceIdentity,
    first_value,
    require_configured,
    vouched_caller,
)

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
OPEN_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection")
INTERNAL_PACKAGE = "perdure.internal."
# How soon a revoked key loses the streams it holds open (plus the keys remembered: auth.py).
RECHECK_SECONDS = 0.5
# Failed authentications an address may make before its unknown tokens wait (per second, and
# at once).
FAILURES_PER_SECOND = 5.0
FAILURE_BURST = 20.0
Check = Callable[[Context], Awaitable[Principal | None]]


def is_internal(service: str) -> bool:
    """Whether a service is one only Perdure's services may call."""
    return service.startswith(INTERNAL_PACKAGE)


def peer_address(context: Context) -> str:
    """The caller's address without its port (`ipv4:10.0.0.5`), so that one client counts
    once whatever connections it opens."""
    peer = context.peer() or "unknown"
    return peer.rsplit(":", 1)[0] if peer.count(":") > 1 else peer


class FailedCredentials:
    """Refusals of bad credentials, kept cheap for the service.

    A token refused once is refused again for REMEMBER_SECONDS without asking anyone (a
    token's secret is random, so a refused token never becomes valid). Each address may fail
    `rate` times a second (bursts of `burst`); past that its new tokens are refused with
    RESOURCE_EXHAUSTED before any lookup, while tokens that passed lately are still checked as
    usual (a flood does not lock out the clients that share its address). Refusals are logged
    once per LOG_SECONDS, summed.
    """

    REMEMBER_SECONDS = 60.0
    LOG_SECONDS = 10.0
    MAX_ENTRIES = 10_000

    def __init__(
        self, service: str, rate: float = FAILURES_PER_SECOND, burst: float = FAILURE_BURST
    ) -> None:
        self._service = service
        self._rate = rate
        self._burst = burst
        self._refused: dict[bytes, tuple[errors.ApiError, float]] = {}
        self._passed: dict[bytes, float] = {}  # digest -> until when it bypasses the budget
        self._budgets: dict[str, TokenBucket] = {}
        self._unlogged: Counter[str] = Counter()
        self._logged_at = 0.0

    async def authenticate(self, authenticate: Authenticate, token: str, address: str) -> Principal:
        """The key `token` proves, asked of `authenticate` only when neither the token nor the
        address has failed too recently."""
        digest = hashlib.sha256(token.encode()).digest()
        known = self._refused.get(digest)
        if known is not None and known[1] > time.monotonic():
            self._note(address)
            raise known[0]
        budget = self._budgets.get(address)
        passed = self._passed.get(digest, 0.0) > time.monotonic()
        if budget is not None and not budget.has_token() and not passed:
            self._note(address)
            raise exhausted(
                Reason.AUTHENTICATION_FAILURE_RATE,
                f"too many failed authentications from {address} (more than {self._rate:g} a "
                "second): new keys from this address are refused for a few seconds",
            )
        try:
            principal = await authenticate(token)
        except errors.ApiError as error:
            if error.code == grpc.StatusCode.UNAUTHENTICATED:
                self._remember(digest, error, address)
            raise
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                refused = unauthenticated(errors.reason_of(error), error.details() or "")
                self._remember(digest, refused, address)
                raise refused from None
            raise
        if len(self._passed) >= self.MAX_ENTRIES:
            self._passed.clear()
        self._passed[digest] = time.monotonic() + self.REMEMBER_SECONDS
        return principal

    def failed(self, address: str) -> None:
        """Count a failure of `address` that needed no lookup (a wrong internal secret)."""
        self._spend(address)
        self._note(address)

    def _remember(self, digest: bytes, error: errors.ApiError, address: str) -> None:
        if len(self._refused) >= self.MAX_ENTRIES:
            self._refused.clear()  # bounded, whatever tokens callers invent
        self._refused[digest] = (error, time.monotonic() + self.REMEMBER_SECONDS)
        self._spend(address)
        self._note(address)

    def _spend(self, address: str) -> None:
        budget = self._budgets.get(address)
        if budget is None:
            if len(self._budgets) >= self.MAX_ENTRIES:
                self._budgets.clear()
            budget = self._budgets[address] = TokenBucket(self._rate, self._burst)
        budget.wait_needed()

    def _note(self, address: str) -> None:
        """Count a refusal; log the sum once per LOG_SECONDS, not once per call."""
        self._unlogged[address] += 1
        now = time.monotonic()
        if now - self._logged_at < self.LOG_SECONDS:
            return
        total = sum(self._unlogged.values())
        worst = ", ".join(f"{a} ({n})" for a, n in self._unlogged.most_common(3))
        log.warning(
            "%s refused %d call(s) with bad credentials from %d address(es) since the last "
            "report; most from %s",
            self._service,
            total,
            len(self._unlogged),
            worst,
        )
        self._unlogged.clear()
        self._logged_at = now


class Guard(grpc.aio.ServerInterceptor):
    """Admits each call by its service's class (see the module); refuses everything else."""

    def __init__(
        self,
        service: str,
        authenticate: Authenticate,
        roles: Mapping[str, int],
        identity: ServiceIdentity,
    ) -> None:
        leaked = [name for name in roles if is_internal(name.strip("/"))]
        if leaked:
            raise ValueError(f"internal services cannot be opened to API keys: {leaked}")
        self._authenticate = authenticate
        self._roles = roles
        self._identity = identity
        self._failures = FailedCredentials(service)
        # Per keyed streaming method, the streams each key holds open.
        self._stream_caps: dict[str, OpenCap] = {}
        # When each stream token last passed a check again: streams sharing a key (a fleet's
        # workers) share its checks.
        self._rechecked: dict[str, float] = {}

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        service = method.strip("/").partition("/")[0]
        if handler is None or service in OPEN_SERVICES:
            return handler
        metadata = handler_call_details.invocation_metadata
        if is_internal(service):
            return _guarded(handler, self._service_check(method, metadata), None)
        needed = self._roles.get(method, self._roles.get(service))
        token = bearer_token(metadata)
        terms = None
        streaming = handler.stream_stream is not None or handler.unary_stream is not None
        if token is not None and streaming:
            terms = _StreamTerms(self._stream_cap(method), self._recheck(token))
        return _guarded(handler, self._key_check(method, needed, token), terms)

    def _stream_cap(self, method: str) -> OpenCap:
        """The cap on the open streams of `method` per key (TaskService.Connect, say; a
        client's watches and stream reads have a cap of their own)."""
        cap = self._stream_caps.get(method)
        if cap is None:
            service, _, name = method.strip("/").partition("/")
            what = f"{service.rsplit('.')[-1]}.{name}"
            per_key = watches_per_key if name in WATCH_METHODS else sessions_per_key
            cap = self._stream_caps[method] = per_key(what)
        return cap

    def _service_check(self, method: str, metadata: Any) -> Check:
        async def check(context: Context) -> Principal | None:
            if not self._identity.proven(context):
                raise self._not_a_service(method, metadata, context)
            vouched = vouched_caller(metadata)
            return None if vouched is None else Principal(vouched[1], vouched[0], vouched[2])

        return check

    def _not_a_service(self, method: str, metadata: Any, context: Context) -> errors.ApiError:
        where = (
            f"{method} is internal: only Perdure's own services may call it (a service "
            "certificate or the internal secret). Clients call the gateway's WorkflowService; "
            "workers, TaskService and JournalService"
        )
        if any(key == SECRET_HEADER for key, _ in metadata or ()):
            self._failures.failed(peer_address(context))
            return unauthenticated(
                Reason.SERVICE_CREDENTIAL_INVALID, f"wrong internal secret: {where}"
            )
        if bearer_token(metadata) is not None or context.auth_context().get("x509_pem_cert"):
            return errors.ApiError(
                grpc.StatusCode.PERMISSION_DENIED,
                Reason.SERVICE_IDENTITY_REQUIRED,
                f"an API key or a worker's or client's certificate proves no service: {where}",
            )
        return unauthenticated(Reason.SERVICE_IDENTITY_MISSING, where)

    def _key_check(self, method: str, needed: int | None, token: str | None) -> Check:
        async def check(context: Context) -> Principal | None:
            if needed is None:
                raise permission_denied(f"{method} is not open to API keys")
            if token is None:
                raise unauthenticated(
                    Reason.API_KEY_MISSING,
                    "this call needs an API key: send `authorization: Bearer <token>` "
                    "(create one with `perdure keys create`)",
                )
            principal = await self._failures.authenticate(
                self._authenticate, token, self._client_address(context)
            )
            if not role_allows(principal.role, needed):
                raise permission_denied(
                    f"API key {principal.key_id} has role {role_name(principal.role)}; "
                    f"{method} needs role {role_name(needed)}"
                )
            return principal

        return check

    def _client_address(self, context: Context) -> str:
        """Who a keyed call comes from: the peer, or the client a proven service relays (the
        gateway's own HTTP server, which calls from loopback on every client's behalf)."""
        relayed = first_value(context.invocation_metadata(), CLIENT_ADDRESS_HEADER)
        if relayed is not None and self._identity.proven(context):
            return f"relayed:{relayed[:100]}"
        return peer_address(context)

    def _recheck(self, token: str) -> Callable[[], Coroutine[Any, Any, None]]:
        """Return once the stream's key stops being valid (revoked), as an ApiError. A check
        another stream of the same key passed within RECHECK_SECONDS counts for this one."""

        async def revoked() -> None:
            while True:
                await asyncio.sleep(RECHECK_SECONDS)
                if time.monotonic() - self._rechecked.get(token, 0.0) < RECHECK_SECONDS:
                    continue
                try:
                    await self._authenticate(token)
                except (errors.ApiError, grpc.aio.AioRpcError) as error:
                    refused = refusal(error)
                    if refused is not None:
                        raise _revoked(refused) from None
                    if isinstance(error, errors.ApiError):
                        raise
                    log.warning("could not check a stream's key again: %s", error.details())
                    continue
                if len(self._rechecked) >= FailedCredentials.MAX_ENTRIES:
                    self._rechecked.clear()
                self._rechecked[token] = time.monotonic()

        return revoked


def guards(service: str, authenticate: Authenticate, roles: Mapping[str, int]) -> list[Guard]:
    """The server interceptors of a service: its Guard with API keys on (which then needs a
    way to tell services apart: see service_identity.require_configured), none with them off."""
    if not auth_enabled():
        return []
    identity = ServiceIdentity(require_configured(service))
    return [Guard(service, authenticate, roles, identity)]


def _revoked(why: str) -> errors.ApiError:
    return unauthenticated(
        Reason.API_KEY_REVOKED,
        f"this stream's API key is no longer valid ({why}); the stream is closed",
    )


@dataclass(frozen=True)
class _StreamTerms:
    """What a keyed stream is held to while it is open: its key's cap of open streams of its
    kind, and its key's validity (`revoked` raises once the key is revoked)."""

    cap: OpenCap
    revoked: Callable[[], Coroutine[Any, Any, None]]


def _guarded(
    handler: grpc.RpcMethodHandler[Any, Any], check: Check, terms: _StreamTerms | None
) -> grpc.RpcMethodHandler[Any, Any]:
    """The handler, run only once `check` passes, with the principal in `current_principal`;
    a keyed stream also holds a place of its key's cap, and ends once its key is revoked."""
    decode, encode = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary is not None:
        unary: Any = handler.unary_unary

        async def unary_unary(request: Any, context: Context) -> Any:
            try:
                current_principal.set(await check(context))
            except (errors.ApiError, grpc.aio.AioRpcError) as error:
                await errors.abort_with(context, error)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, decode, encode)
    if handler.unary_stream is not None:  # a client's watch: one request, many answers
        answers = _guarded_stream(handler.unary_stream, check, terms)
        return grpc.unary_stream_rpc_method_handler(answers, decode, encode)
    if handler.stream_stream is not None:
        answers = _guarded_stream(handler.stream_stream, check, terms)
        return grpc.stream_stream_rpc_method_handler(answers, decode, encode)
    raise TypeError(f"no guard for this handler shape: {handler}")


def _guarded_stream(
    stream: Any, check: Check, terms: _StreamTerms | None
) -> Callable[[Any, Context], AsyncIterator[Any]]:
    """A streaming handler (its request, or request stream, first), run only once `check`
    passes; keyed, it holds a place of its key's cap and ends once its key is revoked."""

    async def guarded(requests: Any, context: Context) -> AsyncIterator[Any]:
        try:
            principal = await check(context)
            place = (
                terms.cap.hold(f"API key {principal.key_id}")
                if terms is not None and principal is not None
                else contextlib.nullcontext()
            )
        except (errors.ApiError, grpc.aio.AioRpcError) as error:
            await errors.abort_with(context, error)
        current_principal.set(principal)
        responses = stream(requests, context)
        with place:
            if terms is None:
                async for response in responses:
                    yield response
                return
            try:
                async for response in await _until_revoked(responses, terms.revoked):
                    yield response
            except errors.ApiError as error:
                await errors.abort_with(context, error)

    return guarded


async def _until_revoked(
    responses: AsyncIterator[Any], revoked: Callable[[], Coroutine[Any, Any, None]]
) -> AsyncIterator[Any]:
    """`responses` until they end, or until `revoked` raises: then the handler is cancelled
    (its cleanup runs) and the error is raised. Each step of the handler runs in one context
    of its own, as it would in a single task (spans it opens close in the context they
    opened in)."""
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()

    async def each() -> AsyncIterator[Any]:
        watch = loop.create_task(revoked())
        step: asyncio.Task[tuple[bool, Any]] | None = None
        try:
            while True:
                step = loop.create_task(_next(responses), context=context)
                await asyncio.wait({step, watch}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    await _cancelled(step)
                    watch.result()  # raises why the stream ends
                    return
                done, response = step.result()
                if done:
                    return
                yield response
        finally:
            # Revoked, ended, or the call itself cancelled: the handler's step under way is
            # cancelled first (its cleanup runs), then the handler is closed.
            watch.cancel()
            if step is not None:
                await _cancelled(step)
            with contextlib.suppress(BaseException):
                await responses.aclose()  # type: ignore[attr-defined]

    return each()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel `task` if it is still running, and wait until it has stopped."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def _next(responses: AsyncIterator[Any]) -> tuple[bool, Any]:
    """The next response, as (ended, response)."""
    try:
        return False, await anext(responses)
    except StopAsyncIteration:
        return True, None
