"""Which failures to reach the services mean the worker is misconfigured (it stops, saying
what to fix) rather than that a service is down for now (it retries)."""

from __future__ import annotations

import asyncio
import socket

import grpc

from perdure.worker._errors import WorkerConfigurationError

# gRPC target schemes that name no host to resolve.
_UNRESOLVED_SCHEMES = frozenset({"ipv4", "ipv6", "unix", "unix-abstract", "vsock"})
# getaddrinfo's answers that a name does not exist (EAI_AGAIN, a DNS server that did not
# answer in time, is worth retrying).
_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)
_FIXES = {
    grpc.StatusCode.UNAUTHENTICATED: "give the worker a valid, unrevoked worker key in "
    "PERDURE_API_KEY (or Worker(api_key=...))",
    grpc.StatusCode.PERMISSION_DENIED: "use a worker key of this namespace whose queues include "
    "this task queue",
}


def host_of(address: str) -> str | None:
    """The host name a gRPC target resolves, or None when it names addresses directly."""
    target = address
    if target.startswith("dns:"):
        target = target.removeprefix("dns:").lstrip("/").rpartition("/")[2]
    elif target.partition(":")[0] in _UNRESOLVED_SCHEMES:
        return None
    if target.startswith("["):  # [IPv6]:port
        return target[1 : target.find("]")]
    return target.rpartition(":")[0] if ":" in target else target


async def check_resolves(address: str, what: str) -> None:
    """Raise WorkerConfigurationError if `address`'s host name does not exist."""
    host = host_of(address)
    if not host:
        return
    try:
        await asyncio.get_running_loop().getaddrinfo(host, None)
    except socket.gaierror as error:
        if error.errno in _NO_SUCH_NAME:
            raise WorkerConfigurationError(
                f"{what} address {address!r} does not resolve ({error.strerror}): check "
                "the address (PERDURE_SCHEDULER_ADDRESS / PERDURE_HISTORY_ADDRESS)"
            ) from None


def permanent(
    error: grpc.aio.AioRpcError, what: str, address: str
) -> WorkerConfigurationError | None:
    """The configuration error an RPC failure reveals, or None if it may pass (UNAVAILABLE...)."""
    fix = _FIXES.get(error.code())
    if fix is None:
        return None
    return WorkerConfigurationError(
        f"{what} at {address} refused this worker: {error.code().name}: {error.details()}; {fix}"
    )
