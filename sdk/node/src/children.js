// Child workflows as the code sees them: the handle ctx.startChild returns, the default child
// id, the parent-close policies, and the error a child that did not complete throws
// (docs/worker-protocol.md §28). The Python SDK's services/worker/src/perdure/worker/_children.py.

import { ChildWorkflowFailedError } from './errors.js';

/** A workflow id's longest (the platform's limit). */
export const MAX_WORKFLOW_ID_LENGTH = 255;

/** ctx.child's parentClosePolicy values, and what they send. */
const POLICIES = new Map([
  ['terminate', 'PARENT_CLOSE_POLICY_TERMINATE'],
  ['request_cancel', 'PARENT_CLOSE_POLICY_REQUEST_CANCEL'],
  ['abandon', 'PARENT_CLOSE_POLICY_ABANDON'],
]);

/**
 * A parentClosePolicy option as the protocol's enum.
 * @param {string} name
 */
export function closePolicy(name) {
  const policy = POLICIES.get(name);
  if (!policy) throw new RangeError(`parentClosePolicy must be one of ${[...POLICIES.keys()].join(', ')}, not ${JSON.stringify(name)}`);
  return policy;
}

/**
 * A workflow id without its namespace (a worker of namespace ns sees "@ns/<id>").
 * @param {string} workflowId
 */
export function publicId(workflowId) {
  return workflowId.startsWith('@') ? workflowId.slice(workflowId.indexOf('/') + 1) : workflowId;
}

/**
 * The child's workflow id: `given`, or "<parent id>-child-<position>" ("-run-<n>" after it in
 * the n-th run of the parent's chain, n > 1), the same on every replay.
 * @param {string} parentId
 * @param {number} runNumber
 * @param {number} position
 * @param {string | undefined} given
 */
export function childId(parentId, runNumber, position, given) {
  if (given !== undefined && given !== null) {
    if (typeof given !== 'string' || !given || given !== given.trim()) {
      throw new TypeError(`id must be a non-empty workflow id, not ${JSON.stringify(given)}`);
    }
    if (given.length > MAX_WORKFLOW_ID_LENGTH || given.startsWith('@')) {
      throw new RangeError(`id must have at most ${MAX_WORKFLOW_ID_LENGTH} characters and not start with '@'`);
    }
    return given;
  }
  let made = `${publicId(parentId)}-child-${position}`;
  if (runNumber > 1) made += `-run-${runNumber}`;
  if (made.length > MAX_WORKFLOW_ID_LENGTH) {
    throw new RangeError(`the default child id '${made.slice(0, 60)}'... is longer than ${MAX_WORKFLOW_ID_LENGTH} characters: pass { id }`);
  }
  return made;
}

/**
 * The error a recorded CHILD_WORKFLOW_FAILED throws into the code.
 * @param {string} stepId the child call's
 * @param {any} event
 */
export function childFailed(stepId, event) {
  return new ChildWorkflowFailedError(stepId, event.failure ?? {}, event.child_workflow_id ?? '', event.child_run_id ?? '', event.name ?? '');
}

/** A child workflow ctx.startChild started: its ids, and `await handle.result()`. */
export class ChildWorkflowHandle {
  /**
   * @param {{_childResult: (call: any) => Promise<any>}} ctx
   * @param {{stepId: string, position: number}} call
   * @param {string} workflowId
   * @param {string} runId
   */
  constructor(ctx, call, workflowId, runId) {
    this._ctx = ctx;
    this._call = call;
    /** The child's workflow id (without the namespace). */
    this.workflowId = workflowId;
    /** The child's run id; "" when it could not start (result() throws then). */
    this.runId = runId;
    /** The child call's step id in the parent's journal. */
    this.stepId = call.stepId;
  }

  /**
   * The child's result once it completes (ChildWorkflowFailedError if it did not); the parent
   * waits holding no worker. Several at once: ctx.gather([a, b]).
   * @returns {Promise<any>}
   */
  result() {
    return this._ctx._childResult(this._call);
  }
}
