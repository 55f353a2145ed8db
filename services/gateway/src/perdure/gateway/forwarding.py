"""How the gateway hands a validated public request to history: scoped to the namespace it
acts in, vouching for the caller's API key (history holds the call to that key's namespace)."""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

from perdure.common.auth import current_principal
from perdure.common.service_identity import caller_metadata

Request = TypeVar("Request", bound=Message)


def in_namespace(request: Request, namespace: str) -> Request:
    """A copy of a public request naming the namespace it acts in."""
    scoped = type(request)()
    scoped.CopyFrom(request)
    scoped.namespace = namespace  # type: ignore[attr-defined]
    return scoped


def vouched() -> tuple[tuple[str, str], ...]:
    """The metadata that vouches for this call's API key (none without keys)."""
    principal = current_principal.get()
    if principal is None:
        return ()
    return caller_metadata(principal.namespace, principal.key_id, principal.role)
