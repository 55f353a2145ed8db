"""How a command reports a failed call: `error: <message> (<REASON>)` on stderr, no
traceback."""

from __future__ import annotations

import sys

import grpc

from perdure.client._errors import reason_of


def said(error: grpc.RpcError) -> str:
    """The message and reason (or, without a reason, the status code) of a failed call."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else ""
    return f"{details or code.name} ({reason_of(error) or code.name})"


def print_rpc_error(error: grpc.RpcError) -> int:
    """Report the failed call; the exit code (1)."""
    print(f"error: {said(error)}", file=sys.stderr)
    return 1
