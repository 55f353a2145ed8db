// Sagas: compensations registered as a workflow goes, run as durable steps in reverse order
// when the saga's body fails or the run is cancelled in it (worker-protocol.md §30).

import { checkName } from './context.js';
import { JournalUnavailableError, LeaseLostError, NonDeterminismError, RunEvictedError, StepFailedError } from './errors.js';

/**
 * The compensations of one saga: `ctx.saga(async (saga) => { ... })` hands it to the body.
 *
 *     await ctx.saga(async (saga) => {
 *       await ctx.step('reserve', () => reserve(order));
 *       saga.addCompensation('release', () => release(order));
 *       await ctx.step('charge', () => charge(order));
 *       saga.addCompensation('refund', () => refund(order));
 *       await ctx.step('ship', () => ship(order));
 *     });
 */
export class Saga {
  /** @param {import('./context.js').WorkflowContext} ctx */
  constructor(ctx) {
    this._ctx = ctx;
    /** @type {(() => Promise<any>)[]} */
    this._compensations = [];
  }

  /**
   * Register the local step `ctx.step(name, fn, options)` to run if the saga compensates.
   * Nothing runs or is journaled now.
   * @param {string} name
   * @param {(info: import('./step-info.js').StepInfo) => any} fn
   * @param {{retry?: import('./retry.js').RetryPolicy, timeout?: number, heartbeatTimeout?: number}} [options]
   */
  addCompensation(name, fn, options = {}) {
    checkName(name);
    if (typeof fn !== 'function') throw new TypeError(`compensation '${name}' needs a function`);
    this._compensations.push(() => this._ctx.step(name, fn, options));
  }

  /**
   * Register the remote step `ctx.call(stepType, input, options)` to run if the saga
   * compensates. Nothing is journaled now.
   * @param {string} stepType
   * @param {any} [input]
   * @param {{taskQueue?: string, retry?: import('./retry.js').RetryPolicy, timeout?: number}} [options]
   */
  addRemoteCompensation(stepType, input = null, options = {}) {
    checkName(stepType, 'step type');
    this._compensations.push(() => this._ctx.call(stepType, input, options));
  }

  /**
   * Run the registered compensations now, last registered first, each once, with the run's
   * cancel request held back until they are done; resolve with the StepFailedErrors of those
   * that failed after their retries (the others still run). The saga is empty afterwards.
   * @returns {Promise<StepFailedError[]>}
   */
  compensate() {
    const pending = this._compensations.reverse();
    this._compensations = [];
    return this._ctx.holdCancellation(async () => {
      const failures = [];
      for (const run of pending) {
        try {
          await run();
        } catch (error) {
          if (!(error instanceof StepFailedError)) throw error;
          failures.push(error);
        }
      }
      return failures;
    });
  }
}

/**
 * Run `body(saga)`; if it throws (its own error, a step's failure, the run's cancellation),
 * compensate and throw the same error again, with `compensationFailures` (the compensations
 * that failed, in the order they ran) and a line each in its stack. Errors that are not the
 * workflow failing (non-determinism, a lost lease) compensate nothing.
 * @template T
 * @param {import('./context.js').WorkflowContext} ctx
 * @param {(saga: Saga) => Promise<T>} body
 * @returns {Promise<T>}
 */
export async function runSaga(ctx, body) {
  if (typeof body !== 'function') throw new TypeError('saga needs an async function (saga) => ...');
  const saga = new Saga(ctx);
  try {
    return await body(saga);
  } catch (error) {
    if (!compensates(error)) throw error;
    const failures = await saga.compensate();
    if (error instanceof Error) {
      Object.defineProperty(error, 'compensationFailures', { value: failures, enumerable: false, configurable: true, writable: true });
      for (const failure of failures) error.stack = `${error.stack}\ncompensation '${failure.stepId}' failed too: ${failure.message}`;
    }
    throw error;
  }
}

/** Whether an error thrown in a saga's body is the workflow failing (or being cancelled). */
function compensates(error) {
  const stops = [NonDeterminismError, LeaseLostError, RunEvictedError, JournalUnavailableError];
  return !stops.some((kind) => error instanceof kind);
}
