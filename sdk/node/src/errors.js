// Errors the SDK raises into workflow and step code, and its own control-flow errors.

/**
 * The base of every error the SDK defines: `error instanceof PerdureError` tells the SDK's
 * errors from the code's own. (Arguments the SDK refuses throw the built-in TypeError and
 * RangeError, as JavaScript's own functions do.)
 */
export class PerdureError extends Error {
  /** @param {string} [message] */
  constructor(message) {
    super(message);
    this.name = 'PerdureError';
  }
}

/** A call of a run the worker no longer keeps (evicted from its cache of suspended runs, see
 * sticky.js): the run goes on from its journal, replayed, and this instance may not record. */
export class RunEvictedError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'RunEvictedError';
  }
}

/** A step failed for good (attempts exhausted or not retryable); raised again on replay. */
export class StepFailedError extends PerdureError {
  /**
   * @param {string} stepId
   * @param {{type?: string, message?: string, stack_trace?: string}} failure
   */
  constructor(stepId, failure) {
    super(`step '${stepId}' failed: ${failure.type}: ${failure.message}`);
    this.name = 'StepFailedError';
    this.stepId = stepId;
    /** The failed attempt's error type name (the thrown error's `name`). */
    this.errorType = failure.type ?? '';
    /** The failed attempt's error message. */
    this.errorMessage = failure.message ?? '';
    this.failure = failure;
  }
}

/**
 * A remote step failed without running: its estimate did not fit a budget (the run's, a
 * key's or the namespace's) and its run was started with onBudgetExceeded "fail".
 * `errorMessage` names the budget and by how much. Never retried.
 */
export class BudgetExceededError extends StepFailedError {
  /**
   * @param {string} stepId
   * @param {{type?: string, message?: string, stack_trace?: string}} failure
   */
  constructor(stepId, failure) {
    super(stepId, failure);
    this.name = 'BudgetExceededError';
  }
}

/** The failure type a step task records for a step refused by a budget (§27). */
export const BUDGET_EXCEEDED = 'BudgetExceeded';
/** Recorded step failures thrown as a StepFailedError subclass, by failure type. */
const STEP_FAILURES = new Map([[BUDGET_EXCEEDED, BudgetExceededError]]);

/**
 * The error a recorded step failure throws into workflow code: by its type, a typed
 * StepFailedError (BudgetExceededError), else StepFailedError itself.
 * @param {string} stepId
 * @param {{type?: string, message?: string, stack_trace?: string}} failure
 * @returns {StepFailedError}
 */
export function stepFailed(stepId, failure) {
  const ErrorClass = STEP_FAILURES.get(failure.type ?? '') ?? StepFailedError;
  return new ErrorClass(stepId, failure);
}

/**
 * A child workflow (ctx.child, ctx.startChild) did not complete: it failed, was cancelled,
 * terminated, or could not start because an open run holds its workflow id (`errorType`
 * "WorkflowAlreadyStarted"). Thrown again, identically, on replay. `status` is the child's final
 * status ("FAILED", "CANCELLED", "TERMINATED"; "" when it never started), `workflowId` and
 * `runId` the child's ("" run id when it never started), `stepId` the child call's.
 */
export class ChildWorkflowFailedError extends PerdureError {
  /**
   * @param {string} stepId
   * @param {{type?: string, message?: string, stack_trace?: string}} failure
   * @param {string} workflowId
   * @param {string} runId
   * @param {string} status
   */
  constructor(stepId, failure = {}, workflowId = '', runId = '', status = '') {
    super(`child workflow '${workflowId}' ('${stepId}') did not complete: ${failure.type}: ${failure.message}`);
    this.name = 'ChildWorkflowFailedError';
    this.stepId = stepId;
    /** The child's failure type (its error's, "WorkflowCancelledError", "Terminated"...). */
    this.errorType = failure.type ?? '';
    /** The child's failure message. */
    this.errorMessage = failure.message ?? '';
    this.failure = failure;
    this.workflowId = workflowId;
    this.runId = runId;
    this.status = status;
  }
}

/** A step attempt ran longer than its `timeout`; counts as a failed attempt. */
export class StepTimeoutError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'StepTimeoutError';
  }
}

/** A step attempt went longer than its `heartbeatTimeout` without calling heartbeat(); counts
 * as a failed attempt. */
export class StepHeartbeatTimeoutError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'StepHeartbeatTimeoutError';
  }
}

/** A step attempt started (it is journaled) and never reported: the worker running it was lost
 * (it crashed, or its lease expired). Recorded as a failed attempt on replay, under the step's
 * retry policy; never thrown by a body. */
export class WorkerLostError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'WorkerLostError';
  }
}

/** The failure of attempt `attempt` of `stepId`, started and never recorded. */
export function lostAttemptError(stepId, attempt) {
  return new WorkerLostError(
    `attempt ${attempt} of step '${stepId}' never reported: the worker running it was lost (it crashed or was killed, or its lease expired)`,
  );
}

/** `ctx.waitForSignal(name, {timeout})` reached its timeout without a signal. */
export class SignalTimeoutError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'SignalTimeoutError';
  }
}

/**
 * ctx.approval reached its expiry with no decision (judged on the database clock, never
 * early); thrown again, identically, on every replay. `expiresAt` is when it was due to expire,
 * `expiredAt` when history recorded it (never earlier), both ISO 8601.
 */
export class ApprovalExpiredError extends PerdureError {
  constructor(approvalId, approvalName, expiresAt, expiredAt) {
    super(`approval '${approvalName}' (${approvalId}) expired at ${expiredAt} with no decision`);
    this.name = 'ApprovalExpiredError';
    this.approvalId = approvalId;
    this.approvalName = approvalName;
    this.expiresAt = expiresAt;
    this.expiredAt = expiredAt;
  }
}

/**
 * Raised into the workflow at its next durable call after CancelWorkflow. Catch it to run
 * compensating steps, then rethrow it to end the run as CANCELLED; returning normally
 * completes the run instead.
 */
export class WorkflowCancelledError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'WorkflowCancelledError';
  }
}

/**
 * The workflow code no longer matches its journal. Never thrown into workflow code (it could
 * be caught there): the SDK stops the run and parks it with this error's message.
 */
export class NonDeterminismError extends PerdureError {
  /**
   * @param {string} message
   * @param {{position?: number|null, expected?: string, found?: string}} [where] the call at
   *   which code and journal part, what the journal recorded there (event kind and step id),
   *   and the code's call there (kind and step id), where known: the replay gate reports them
   */
  constructor(message, { position = null, expected = '', found = '' } = {}) {
    super(message);
    this.name = 'NonDeterminismError';
    this.position = position;
    this.expected = expected;
    this.found = found;
  }
}

/** A journal call failed: the gRPC status code (name), message and ErrorInfo reason. */
export class JournalCallError extends PerdureError {
  /**
   * @param {string} code e.g. "FAILED_PRECONDITION"
   * @param {string} message
   * @param {string} [reason] e.g. "STALE_FENCE"
   */
  constructor(code, message, reason = '') {
    super(`${code}${reason ? ` (${reason})` : ''}: ${message}`);
    this.name = 'JournalCallError';
    this.code = code;
    this.reason = reason;
    this.detail = message;
  }
}

/** Another worker holds the lease now (STALE_FENCE, WORKFLOW_CLOSED, STEP_CLOSED, LEASE_NOT_HELD). */
export class LeaseLostError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'LeaseLostError';
  }
}

/** History refused a request as invalid or too large: sending it again cannot help. */
export class JournalRejectedError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'JournalRejectedError';
  }
}

/** History could not be reached, or answered unexpectedly: leave the lease to expire. */
export class JournalUnavailableError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'JournalUnavailableError';
  }
}

// History's answers that mean this lease (or step) is not ours to write any more (with worker
// keys, LEASE_NOT_HELD when a worker of another key holds it now; JOURNAL_TOO_LARGE: the run was
// parked as its load was refused).
const LEASE_LOST_REASONS = new Set(['STALE_FENCE', 'WORKFLOW_CLOSED', 'STEP_CLOSED', 'LEASE_NOT_HELD']);
const REJECTED_CODES = new Set(['INVALID_ARGUMENT', 'RESOURCE_EXHAUSTED']);

/**
 * Classify a failed journal call as the SDK handles it.
 * @param {unknown} error
 * @returns {Error}
 */
export function classifyJournalError(error) {
  if (error instanceof JournalCallError) {
    if (LEASE_LOST_REASONS.has(error.reason)) {
      return new LeaseLostError(error.detail || error.reason);
    }
    if (REJECTED_CODES.has(error.code)) {
      return new JournalRejectedError(`${error.reason}: ${error.detail}`);
    }
    return new JournalUnavailableError(error.message);
  }
  if (error instanceof LeaseLostError || error instanceof JournalRejectedError || error instanceof JournalUnavailableError) {
    return error;
  }
  return new JournalUnavailableError(String(/** @type {any} */ (error)?.message ?? error));
}

/**
 * The worker cannot serve as configured, and retrying will not help: its key is missing,
 * invalid, revoked or not a worker key of this namespace and queue, or an address does not
 * resolve. `Worker.run()` rejects with it.
 */
export class WorkerConfigurationError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'WorkerConfigurationError';
  }
}

/** A call of the gateway's WorkflowService failed (Client): the gRPC status code (name), the
 * message and the ErrorInfo reason. */
export class RpcError extends PerdureError {
  /**
   * @param {string} code e.g. "NOT_FOUND"
   * @param {string} message
   * @param {string} [reason] e.g. "WORKFLOW_NOT_FOUND"
   */
  constructor(code, message, reason = '') {
    super(`${code}${reason ? ` (${reason})` : ''}: ${message}`);
    this.name = 'RpcError';
    this.code = code;
    this.reason = reason;
    /** The gateway's message. */
    this.details = message;
  }
}

/** `client.wait()` (or `client.result()`) gave up: the run was still open at its timeout. */
export class WaitTimeoutError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'WaitTimeoutError';
  }
}

/** `client.result()`: the run closed without a result (failed, parked, cancelled or
 * terminated). */
export class WorkflowEndedError extends PerdureError {
  /**
   * @param {string} workflowId
   * @param {string} status e.g. "WORKFLOW_STATUS_FAILED"
   * @param {{type?: string, message?: string} | null} failure
   */
  constructor(workflowId, status, failure) {
    const state = String(status).replace(/^WORKFLOW_STATUS_/, '').toLowerCase();
    super(`workflow '${workflowId}' ${state}${failure ? `: ${failure.type}: ${failure.message}` : ''}`);
    this.name = 'WorkflowEndedError';
    this.workflowId = workflowId;
    this.status = status;
    this.failure = failure;
  }
}
