"""Every reason an error answers with (the google.rpc.ErrorInfo `reason`, domain perdure.dev):
the stable code a caller acts on, whichever service answers. Each is documented for callers
(README.md, docs/, the protos), and no service spells one but through this enum
(tests/unit/common/test_reasons.py checks both)."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """An error's reason, as callers read it."""

    # The request itself.
    INVALID_REQUEST = "INVALID_REQUEST"  # a malformed field, named in the message
    INVALID_JSON = "INVALID_JSON"
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"
    BODY_TOO_LARGE = "BODY_TOO_LARGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    # Who is calling, and what it may do.
    API_KEY_MISSING = "API_KEY_MISSING"
    API_KEY_INVALID = "API_KEY_INVALID"
    API_KEY_REVOKED = "API_KEY_REVOKED"
    API_KEY_NOT_FOUND = "API_KEY_NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    AUTHENTICATION_FAILURE_RATE = "AUTHENTICATION_FAILURE_RATE"
    # A service calling another (never a user's call).
    SERVICE_IDENTITY_MISSING = "SERVICE_IDENTITY_MISSING"
    SERVICE_IDENTITY_REQUIRED = "SERVICE_IDENTITY_REQUIRED"
    SERVICE_CREDENTIAL_INVALID = "SERVICE_CREDENTIAL_INVALID"
    # Limits.
    RATE_LIMITED = "RATE_LIMITED"
    STREAM_MESSAGE_RATE_EXCEEDED = "STREAM_MESSAGE_RATE_EXCEEDED"
    SESSIONS_PER_KEY_EXCEEDED = "SESSIONS_PER_KEY_EXCEEDED"
    TOO_MANY_FEEDS = "TOO_MANY_FEEDS"
    # Runs.
    WORKFLOW_NOT_FOUND = "WORKFLOW_NOT_FOUND"
    RUN_NOT_FOUND = "RUN_NOT_FOUND"
    WORKFLOW_ID_CONFLICT = "WORKFLOW_ID_CONFLICT"
    WORKFLOW_CLOSED = "WORKFLOW_CLOSED"
    WORKFLOW_TYPE_NOT_REGISTERED = "WORKFLOW_TYPE_NOT_REGISTERED"
    TASK_QUEUE_NOT_FOUND = "TASK_QUEUE_NOT_FOUND"
    STATE_NOT_FOUND = "STATE_NOT_FOUND"
    FLOW_LIMIT_NOT_FOUND = "FLOW_LIMIT_NOT_FOUND"
    BUDGET_NOT_FOUND = "BUDGET_NOT_FOUND"
    PAYLOAD_NOT_FOUND = "PAYLOAD_NOT_FOUND"
    # The fence (history/fencing.py).
    STALE_FENCE = "STALE_FENCE"
    FENCE_NOT_LOADED = "FENCE_NOT_LOADED"
    LEASE_NOT_HELD = "LEASE_NOT_HELD"
    # Steps and signals.
    STEP_NOT_FOUND = "STEP_NOT_FOUND"
    STEP_CLOSED = "STEP_CLOSED"
    STEP_CONFLICT = "STEP_CONFLICT"
    SIGNAL_ALREADY_CONSUMED = "SIGNAL_ALREADY_CONSUMED"
    # Resume, reset and fork (history/recovery.py).
    WORKFLOW_NOT_PARKED = "WORKFLOW_NOT_PARKED"
    STEP_NOT_IN_JOURNAL = "STEP_NOT_IN_JOURNAL"
    # Schedules (history/schedules.py).
    SCHEDULE_NOT_FOUND = "SCHEDULE_NOT_FOUND"
    SCHEDULE_ID_CONFLICT = "SCHEDULE_ID_CONFLICT"
    # Approvals (history/approvals.py).
    APPROVAL_NOT_FOUND = "APPROVAL_NOT_FOUND"
    APPROVAL_DETAILS_CHANGED = "APPROVAL_DETAILS_CHANGED"
    APPROVAL_DECIDED = "APPROVAL_DECIDED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    # Export and import (history/run_archive.py): only a closed run is imported.
    WORKFLOW_OPEN = "WORKFLOW_OPEN"
    # A fault of the service's own, logged there and never described to the caller.
    INTERNAL = "INTERNAL"


# Answered only to a service calling another, never to a user's call: not in the user docs.
INTERNAL_REASONS = frozenset(
    {
        Reason.SERVICE_IDENTITY_MISSING,
        Reason.SERVICE_IDENTITY_REQUIRED,
        Reason.SERVICE_CREDENTIAL_INVALID,
    }
)
