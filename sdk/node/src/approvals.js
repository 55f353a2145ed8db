// What ctx.approval gives the code: the decision, the escalation its callback is told of, read
// from the approval's events (docs/worker-protocol.md §29). As the Python SDK's _approvals.py.

import { ApprovalExpiredError } from './errors.js';

export const APPROVAL_PREFIX = '$approval:';

/**
 * @typedef {{approved: boolean, approvalId: string, decidedBy: string, reason: string,
 *   decidedAt: Date, escalated: boolean}} ApprovalDecision
 * @typedef {{approvalId: string, name: string, escalatedAt: Date, escalateTo: string[]}} ApprovalEscalation
 */

/** An APPROVAL_DECIDED event's payload as the code's decision. @returns {ApprovalDecision} */
export function decisionOf(content) {
  return {
    approved: Boolean(content.approved),
    approvalId: String(content.approval_id),
    decidedBy: String(content.decided_by),
    reason: String(content.reason ?? ''),
    decidedAt: new Date(content.decided_at),
    escalated: Boolean(content.escalated),
  };
}

/** An APPROVAL_ESCALATED event's payload as what the callback is told. @returns {ApprovalEscalation} */
export function escalationOf(content, name) {
  return {
    approvalId: String(content.approval_id),
    name,
    escalatedAt: new Date(content.escalated_at),
    escalateTo: (content.escalate_to ?? []).map(String),
  };
}

/** An APPROVAL_EXPIRED event's payload as the error thrown into the code. */
export function expiredError(content, name) {
  return new ApprovalExpiredError(String(content.approval_id), name, String(content.expires_at), String(content.expired_at));
}

/**
 * Refuse what history would refuse, before anything is journaled.
 * @param {any} timeout
 * @param {any} escalateAfter
 * @param {...any} deciders
 */
export function checkApproval(timeout, escalateAfter, ...deciders) {
  if (!(typeof timeout === 'number' && Number.isFinite(timeout) && timeout > 0)) {
    throw new RangeError(`timeout must be a positive number of seconds, not ${timeout}`);
  }
  if (escalateAfter != null && !(typeof escalateAfter === 'number' && escalateAfter > 0 && escalateAfter < timeout)) {
    throw new RangeError(`escalateAfter must be more than 0 s and less than timeout, not ${escalateAfter}`);
  }
  for (const entries of deciders) {
    if (entries != null && (!Array.isArray(entries) || !entries.every((e) => typeof e === 'string' && e))) {
      throw new TypeError('approvers and escalateTo are arrays of role names or API key ids or names');
    }
  }
}
