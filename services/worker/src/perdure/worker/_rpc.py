"""Channels and error details shared by the SDK's gRPC clients."""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

# Retries UNAVAILABLE transparently: every journal call is idempotent, so a call whose answer
# was lost can safely be sent again.
_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{}],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)

CHANNEL_OPTIONS = [
    ("grpc.service_config", _SERVICE_CONFIG),
    ("grpc.enable_retries", 1),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]


def error_reason(error: grpc.RpcError) -> str:
    """The ErrorInfo reason a Perdure service attached to an error, or ""."""
    # Sync calls give _Metadatum pairs and aio calls a Metadata mapping: both iterate as pairs.
    trailing: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else ()
    for key, value in trailing or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return str(info.reason)
    return ""
