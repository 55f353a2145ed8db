"""What ctx.approval gives the code: the decision, the escalation its callback is told of,
read from the approval's events (docs/worker-protocol.md §29)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from perdure.worker._errors import ApprovalExpiredError

APPROVAL_PREFIX = "$approval:"


@dataclass(frozen=True)
class ApprovalDecision:
    """How a person decided an approval (ApprovalService.DecideApproval)."""

    approved: bool
    approval_id: str
    decided_by: str  # an API key id; with authentication off, the name given or "anonymous"
    reason: str  # the decider's reason or comment
    decided_at: datetime  # database clock
    escalated: bool  # decided after it escalated


@dataclass(frozen=True)
class ApprovalEscalation:
    """An approval undecided for its escalate_after: `escalate_to` may decide it too."""

    approval_id: str
    name: str
    escalated_at: datetime
    escalate_to: list[str]


OnEscalated = Callable[[ApprovalEscalation], Awaitable[None]]


def decision_of(content: dict[str, Any]) -> ApprovalDecision:
    """An APPROVAL_DECIDED event's payload as the code's decision."""
    return ApprovalDecision(
        approved=bool(content["approved"]),
        approval_id=str(content["approval_id"]),
        decided_by=str(content["decided_by"]),
        reason=str(content.get("reason") or ""),
        decided_at=datetime.fromisoformat(content["decided_at"]),
        escalated=bool(content.get("escalated")),
    )


def escalation_of(content: dict[str, Any], name: str) -> ApprovalEscalation:
    """An APPROVAL_ESCALATED event's payload as what the callback is told."""
    return ApprovalEscalation(
        approval_id=str(content["approval_id"]),
        name=name,
        escalated_at=datetime.fromisoformat(content["escalated_at"]),
        escalate_to=[str(entry) for entry in content.get("escalate_to") or []],
    )


def expired_error(content: dict[str, Any], name: str) -> ApprovalExpiredError:
    """An APPROVAL_EXPIRED event's payload as the error raised into the code."""
    return ApprovalExpiredError(
        str(content["approval_id"]), name, str(content["expires_at"]), str(content["expired_at"])
    )


def check_approval(
    timeout: float, escalate_after: float | None, *deciders: Sequence[str] | None
) -> None:
    """Refuse what history would refuse, before anything is journaled."""
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if escalate_after is not None and not (
        isinstance(escalate_after, int | float) and 0 < escalate_after < timeout
    ):
        raise ValueError(
            f"escalate_after must be more than 0 s and less than timeout, not {escalate_after!r}"
        )
    for entries in deciders:
        if entries is not None and (
            isinstance(entries, str) or not all(isinstance(e, str) and e for e in entries)
        ):
            raise ValueError(
                "approvers and escalate_to are lists of role names or API key ids or names, "
                f"not {entries!r}"
            )
