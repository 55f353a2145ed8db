"""How a Perdure service proves it is one: the only callers `perdure.internal.*` RPCs answer.

Two proofs, either enough:

- under mTLS, a client certificate whose URI SAN is `spiffe://perdure/service/<name>`
  (`perdure certs dev` writes one into service certificates only, never into worker or client
  ones);
- the internal credential, a secret shared by the services alone (`PERDURE_INTERNAL_SECRET`,
  sent in the `perdure-internal-secret` metadata of every call between services).
  `PERDURE_INTERNAL_SECRET_ACCEPTED` names a second secret accepted but never sent, so the
  secret rotates without downtime: accept the new one everywhere, then send it, then drop the
  old one.

Facts a service asserts about its own caller (the gateway: which namespace a call acts in, and
with which API key) travel as metadata too, and are believed only under a proven identity.
"""

from __future__ import annotations

import functools
import hmac
import os
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography import x509

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.telemetry.rpc import TLSConfigError, TLSFiles, aio_channel, read_pem

SECRET_HEADER = "perdure-internal-secret"
SERVICE_URI_PREFIX = "spiffe://perdure/service/"
MIN_SECRET_LENGTH = 32
# The caller a service vouches for: the namespace it acts in, its key id and role.
CALLER_NAMESPACE_HEADER = "perdure-caller-namespace"
CALLER_KEY_HEADER = "perdure-caller-key-id"
CALLER_ROLE_HEADER = "perdure-caller-role"
# The address of the client a service relays a call for (the gateway's HTTP server).
CLIENT_ADDRESS_HEADER = "perdure-client-address"


def _secret(variable: str) -> str | None:
    value = os.environ.get(variable, "").strip()
    if not value:
        return None
    if len(value) < MIN_SECRET_LENGTH:
        raise SystemExit(
            f"{variable} must be at least {MIN_SECRET_LENGTH} characters (make one with "
            '`python -c "import secrets; print(secrets.token_urlsafe(32))"`)'
        )
    return value


@dataclass(frozen=True)
class InternalSecrets:
    """The internal credential of this process: the one it sends and every one it accepts."""

    sent: str | None
    accepted: tuple[str, ...]

    @classmethod
    def from_env(cls) -> InternalSecrets:
        """PERDURE_INTERNAL_SECRET (sent and accepted), PERDURE_INTERNAL_SECRET_ACCEPTED."""
        sent = _secret("PERDURE_INTERNAL_SECRET")
        also = _secret("PERDURE_INTERNAL_SECRET_ACCEPTED")
        return cls(sent, tuple(s for s in (sent, also) if s is not None))

    def matches(self, presented: str) -> bool:
        """Whether `presented` is an accepted secret (compared in constant time)."""
        given = presented.encode()
        # No early exit: every accepted secret is compared.
        return sum(hmac.compare_digest(given, s.encode()) for s in self.accepted) > 0


def outgoing_metadata() -> tuple[tuple[str, str], ...]:
    """What a service sends on its calls to other services: its internal secret, if set."""
    secret = InternalSecrets.from_env().sent
    return ((SECRET_HEADER, secret),) if secret is not None else ()


@functools.lru_cache(maxsize=256)
def service_names_in(pem: bytes) -> tuple[str, ...]:
    """The service names a certificate's `spiffe://perdure/service/<name>` URIs claim (parsed
    once per certificate: peers present the same one on every call)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return ()
    uris = sans.get_values_for_type(x509.UniformResourceIdentifier)
    return tuple(
        u.removeprefix(SERVICE_URI_PREFIX) for u in uris if u.startswith(SERVICE_URI_PREFIX)
    )


def first_value(metadata: Any, name: str) -> str | None:
    """The first value of metadata entry `name`, if any."""
    for key, value in metadata or ():
        if key == name and isinstance(value, str):
            return value
    return None


class ServiceIdentity:
    """Checks that a call comes from a Perdure service. A certificate is trusted only because
    the server's TLS already verified it against PERDURE_TLS_CA."""

    def __init__(self, secrets: InternalSecrets) -> None:
        self._secrets = secrets

    def proven(self, context: grpc.aio.ServicerContext[Any, Any]) -> bool:
        """Whether the call carries a service certificate or an accepted internal secret."""
        presented = first_value(context.invocation_metadata(), SECRET_HEADER)
        if presented is not None and self._secrets.matches(presented):
            return True
        auth = context.auth_context()
        return any(service_names_in(pem) for pem in auth.get("x509_pem_cert", ()))


def vouched_caller(metadata: Any) -> tuple[str, str, int] | None:
    """The caller a service vouches for (namespace, key id, role), if it names one."""
    namespace = first_value(metadata, CALLER_NAMESPACE_HEADER)
    key_id = first_value(metadata, CALLER_KEY_HEADER)
    role = first_value(metadata, CALLER_ROLE_HEADER)
    if namespace is None or key_id is None or role is None:
        return None
    if role not in admin.Role.DESCRIPTOR.values_by_name:
        return None
    return namespace, key_id, admin.Role.Value(role)


def caller_metadata(namespace: str, key_id: str, role: int) -> tuple[tuple[str, str], ...]:
    """The metadata by which a service vouches for its caller."""
    return (
        (CALLER_NAMESPACE_HEADER, namespace),
        (CALLER_KEY_HEADER, key_id),
        (CALLER_ROLE_HEADER, admin.Role.Name(role)),
    )


def require_configured(service: str) -> InternalSecrets:
    """This service's internal secrets; exit at start if it has no way to prove itself to
    the others nor to check them (with keys on, internal calls would all be refused)."""
    secrets = InternalSecrets.from_env()
    if secrets.accepted:
        return secrets
    files = TLSFiles.from_env()
    if files.cert is not None:
        try:
            names = service_names_in(read_pem("PERDURE_TLS_CERT", files.cert))
        except TLSConfigError as error:
            raise SystemExit(f"{service}: {error}") from None
        if names:
            return secrets
    raise SystemExit(
        f"{service}: with API keys on (PERDURE_AUTH=on) services prove to each other who they "
        "are: set PERDURE_INTERNAL_SECRET (the same secret of at least "
        f"{MIN_SECRET_LENGTH} characters in gateway, history and scheduler, and in no worker), "
        f"or use mTLS certificates carrying a {SERVICE_URI_PREFIX}<name> URI "
        "(`perdure certs dev` writes them)"
    )


def service_channel(address: str) -> grpc.aio.Channel:
    """A channel to another Perdure service, whose calls carry this service's credential."""
    return aio_channel(address, metadata=outgoing_metadata())
