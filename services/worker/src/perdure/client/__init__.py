"""Call Perdure's public API: start workflows, describe them, read their history. Payloads in
the answers (input, result, outputs, state) decode with from_payload. A failed call raises
RpcError (a PerdureError and a grpc.RpcError)."""

from perdure.client._client import Client, RpcError, WaitTimeoutError
from perdure.worker._errors import PerdureError
from perdure.worker._payload import from_payload, to_payload

__all__ = ["Client", "PerdureError", "RpcError", "WaitTimeoutError", "from_payload", "to_payload"]
