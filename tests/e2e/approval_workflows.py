"""Workflows of the approval tests: one that asks for an approval and returns what became of
it (its decision, or its expiry with the database time the code went on at)."""

from __future__ import annotations

from typing import Any

from perdure.worker import ApprovalEscalation, ApprovalExpiredError, WorkflowContext, workflow


@workflow
async def ask(ctx: WorkflowContext, args: dict[str, Any]) -> dict[str, Any]:
    """ctx.approval with `args`' settings; on escalation it publishes state "escalated"."""

    async def escalated(escalation: ApprovalEscalation) -> None:
        await ctx.set_state(
            "escalated",
            {"approval_id": escalation.approval_id, "escalate_to": escalation.escalate_to},
        )

    # details_size: details of that many bytes, made here (a start's input has the same limit).
    details = {"blob": "x" * args["details_size"]} if "details_size" in args else args["details"]
    try:
        decision = await ctx.approval(
            args.get("name", "deploy"),
            details,
            timeout=args["timeout"],
            escalate_after=args.get("escalate_after"),
            approvers=args.get("approvers"),
            escalate_to=args.get("escalate_to"),
            on_escalated=escalated,
        )
    except ApprovalExpiredError as expired:
        now = await ctx.now()
        return {
            "expired": True,
            "approval_id": expired.approval_id,
            "expires_at": expired.expires_at,
            "expired_at": expired.expired_at,
            "went_on_at": now.isoformat(),
        }
    return {
        "approved": decision.approved,
        "approval_id": decision.approval_id,
        "decided_by": decision.decided_by,
        "reason": decision.reason,
        "decided_at": decision.decided_at.isoformat(),
        "escalated": decision.escalated,
    }
