// RetryPolicy: how often and how soon a failed step is tried again (as the Python SDK's).

import { fromDuration, toDuration } from './payload.js';

/**
 * A step's retry schedule. Attempt n (n >= 1) that fails is retried after
 * `min(initialInterval * backoffCoefficient ** (n - 1), maximumInterval)` seconds, on the
 * database clock, until `maximumAttempts` attempts have failed (0: no limit). Errors whose
 * `name` (or the name of a class in their prototype chain) is listed in
 * `nonRetryableErrorTypes` are never retried.
 */
export class RetryPolicy {
  /**
   * @param {{initialInterval?: number, backoffCoefficient?: number, maximumInterval?: number,
   *   maximumAttempts?: number, nonRetryableErrorTypes?: string[]}} [options]
   */
  constructor({
    initialInterval = 1.0,
    backoffCoefficient = 2.0,
    maximumInterval = 60.0,
    maximumAttempts = 5,
    nonRetryableErrorTypes = [],
  } = {}) {
    if (!(Number.isFinite(initialInterval) && initialInterval >= 0)) {
      throw new RangeError('initialInterval must be a finite number of seconds >= 0');
    }
    if (!(Number.isFinite(backoffCoefficient) && backoffCoefficient >= 1)) {
      throw new RangeError('backoffCoefficient must be >= 1');
    }
    if (!(Number.isFinite(maximumInterval) && maximumInterval >= 0)) {
      throw new RangeError('maximumInterval must be a finite number of seconds >= 0');
    }
    if (!(Number.isInteger(maximumAttempts) && maximumAttempts >= 0)) {
      throw new RangeError('maximumAttempts must be an integer >= 0 (0 means unlimited)');
    }
    if (typeof nonRetryableErrorTypes === 'string' || !Array.isArray(nonRetryableErrorTypes)) {
      throw new TypeError('nonRetryableErrorTypes is an array of error names');
    }
    this.initialInterval = initialInterval;
    this.backoffCoefficient = backoffCoefficient;
    this.maximumInterval = maximumInterval;
    this.maximumAttempts = maximumAttempts;
    this.nonRetryableErrorTypes = Object.freeze([...nonRetryableErrorTypes]);
    Object.freeze(this);
  }

  /**
   * Seconds between the failure of `attempt` and the next attempt.
   * @param {number} attempt
   */
  delay(attempt) {
    const exponent = Math.min(attempt - 1, 1000);
    return Math.min(this.initialInterval * this.backoffCoefficient ** exponent, this.maximumInterval);
  }

  /**
   * Whether a failure of `attempt` with `error` is tried again.
   * @param {unknown} error
   * @param {number} attempt
   */
  retries(error, attempt) {
    if (this.maximumAttempts && attempt >= this.maximumAttempts) return false;
    const names = errorNames(error);
    return !this.nonRetryableErrorTypes.some((name) => names.has(name));
  }

  /** The policy as a perdure.api.worker.v1.RetryPolicy message. */
  toProto() {
    return {
      initial_interval: toDuration(this.initialInterval),
      backoff_coefficient: this.backoffCoefficient,
      maximum_interval: toDuration(this.maximumInterval),
      maximum_attempts: this.maximumAttempts,
      non_retryable_error_types: [...this.nonRetryableErrorTypes],
    };
  }

  /**
   * A policy from a perdure.api.worker.v1.RetryPolicy message; unset: the defaults.
   * @param {any} message
   */
  static fromProto(message) {
    if (!message) return new RetryPolicy();
    return new RetryPolicy({
      initialInterval: fromDuration(message.initial_interval) ?? 0,
      backoffCoefficient: Math.max(1, Number(message.backoff_coefficient) || 1),
      maximumInterval: fromDuration(message.maximum_interval) ?? 0,
      maximumAttempts: Math.max(0, Number(message.maximum_attempts) || 0),
      nonRetryableErrorTypes: [...(message.non_retryable_error_types ?? [])],
    });
  }
}

/** The names an error answers to: its `name` and the constructor names up its chain. */
function errorNames(error) {
  const names = new Set();
  if (error && typeof error === 'object') {
    if (typeof error.name === 'string') names.add(error.name);
    for (let proto = Object.getPrototypeOf(error); proto; proto = Object.getPrototypeOf(proto)) {
      const ctor = proto.constructor;
      if (ctor && typeof ctor.name === 'string' && ctor.name) names.add(ctor.name);
    }
  }
  return names;
}

/** Steps that are never retried ($now). */
export const NO_RETRY = new RetryPolicy({ maximumAttempts: 1 });
