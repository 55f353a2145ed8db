"""Call Perdure's public API: start workflows, describe them, read their history. Payloads in
the answers (input, result, outputs, state) decode with from_payload."""

from perdure.client._client import Client
from perdure.worker._payload import from_payload, to_payload

__all__ = ["Client", "from_payload", "to_payload"]
