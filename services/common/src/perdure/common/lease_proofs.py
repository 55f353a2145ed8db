"""Lease proofs: the scheduler's signed word that it granted a lease to an API key, carried by
the worker from its Task to the load that takes the lease up, so that history need not ask the
scheduler (CheckLease) on every task.

A proof binds the lease (workflow id, step id, fence), the key it was granted to and the
lease's first expiry, with an HMAC-SHA256 under the services' internal secret
(service_identity.InternalSecrets): only a service can make one, a proof of one key proves
nothing for another, and none outlives the lease's first term. History accepts a proof made
with any secret it accepts (so the secret rotates as before) and, for anything else (no
proof, a wrong or expired one, services that share no secret but certificates), asks the
scheduler as it always did: a proof is a shortcut to the same answer, never a second way in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass

from perdure.common.service_identity import InternalSecrets

_EXPIRY_BYTES = 8  # the expiry's milliseconds since the epoch, big-endian, then the MAC
_MAC_BYTES = hashlib.sha256().digest_size
PROOF_BYTES = _EXPIRY_BYTES + _MAC_BYTES


@dataclass(frozen=True)
class LeaseProofs:
    """Makes (with the secret this service sends) and checks (with any it accepts) proofs."""

    secrets: InternalSecrets

    def sign(
        self, workflow_id: str, step_id: str, fence: int, key_id: str, expires: float
    ) -> bytes:
        """A proof that `key_id` was granted the lease until `expires` (seconds since the
        epoch); empty when this service sends no secret."""
        if self.secrets.sent is None:
            return b""
        expiry = int(expires * 1000).to_bytes(_EXPIRY_BYTES, "big")
        message = _message(workflow_id, step_id, fence, key_id, expiry)
        return expiry + _mac(self.secrets.sent, message)

    def proves(
        self,
        proof: bytes,
        workflow_id: str,
        step_id: str,
        fence: int,
        key_id: str,
        now: float | None = None,
    ) -> bool:
        """Whether `proof` says that `key_id` was granted this lease, and its term is not
        over (by this host's clock, `now` if given)."""
        if len(proof) != PROOF_BYTES or not self.secrets.accepted:
            return False
        expiry, mac = proof[:_EXPIRY_BYTES], proof[_EXPIRY_BYTES:]
        if int.from_bytes(expiry, "big") <= (time.time() if now is None else now) * 1000:
            return False
        message = _message(workflow_id, step_id, fence, key_id, expiry)
        # No early exit: every accepted secret is tried.
        return sum(hmac.compare_digest(mac, _mac(s, message)) for s in self.secrets.accepted) > 0


def _message(workflow_id: str, step_id: str, fence: int, key_id: str, expiry: bytes) -> bytes:
    fields = ["perdure lease proof 1", workflow_id, step_id, fence, key_id, expiry.hex()]
    return json.dumps(fields, separators=(",", ":")).encode()  # unambiguous, whatever the ids


def _mac(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()
