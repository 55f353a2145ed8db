// A local step's attempts (ctx.step, and the SDK's own recorded calls such as ctx.now()):
// replay its recorded outcome, or run an attempt and journal its start and outcome, retrying
// on the durable schedule of its policy.

import { JournalRejectedError, classifyJournalError, lostAttemptError, stepFailed } from './errors.js';
import { Frames } from './frames.js';
import { NEVER } from './journal.js';
import { failureFrom, fromPayload, hasPayload, timestampMs, toDuration, toPayload, toTimestamp } from './payload.js';
import { EVENT, INTERNAL_PREFIX, STEP_OUTCOMES, WAIT, kindName, ref } from './replay.js';
import { NO_RETRY } from './retry.js';
import { ANNOUNCE_AFTER_MS, Pulse, StepInfo, invokeWithLimits } from './step-info.js';
import { stepAttemptEnded, stepAttemptSpan, withSpan } from './telemetry.js';

/**
 * @typedef {import('./context.js').WorkflowContext} WorkflowContext
 * @typedef {import('./replay.js').Call} Call
 * @typedef {import('./retry.js').RetryPolicy} RetryPolicy
 */

/**
 * A local step: replay it, or run an attempt and record its outcome.
 * @param {WorkflowContext} ctx
 * @param {{done: boolean}} op
 * @param {Call} call
 * @param {(info: StepInfo) => any} fn
 * @param {RetryPolicy} retry
 * @param {{limit: number|null, beatLimit: number|null}} limits
 */
export async function runLocalStep(ctx, op, call, fn, retry, limits) {
  await ctx._check(call, { step: true });
  const recorded = call.recorded;
  const internal = call.name.startsWith(INTERNAL_PREFIX);
  if (recorded) {
    if (!STEP_OUTCOMES.has(recorded.event_type)) {
      return ctx._nondeterminism(
        `workflow '${ctx.workflowId}': call #${call.position} is step '${call.stepId}', but the journal recorded a ${kindName(recorded)} there`,
        call,
        `step '${call.stepId}'`,
      );
    }
    if (!internal) ctx._log.info(`Skipping completed step: ${call.stepId}`);
    if (recorded.event_type === EVENT.STEP_FAILED) throw stepFailed(call.stepId, recorded.failure ?? {});
    return ctx._value(recorded);
  }
  // Waiting for a retry, the run may be woken and resumed (sticky execution): then look again.
  const again = (/** @type {{done: boolean}} */ next) => runLocalStep(ctx, next, call, fn, retry, limits);
  const failures = ctx._replay.failedAttempts.get(call.stepId) ?? [];
  // An attempt started and never recorded was lost with its worker: it fails now.
  const started = ctx._replay.startedAttempts.get(call.stepId) ?? 0;
  const lost = started > 0 && !failures.some((event) => Number(event.attempt) === started);
  if (failures.length && !lost) {
    const last = failures[failures.length - 1];
    if (timestampMs(last.due_time) > ctx._nowMs) {
      // woken early (a signal, a cancel request): wait on
      return ctx._block(op, call, { kind: WAIT.RETRY, name: call.stepId, until: last.due_time }, again);
    }
  }
  const attempt = lost ? started : failures.length + 1;
  const request = { ...ref(call), attempt, start_time: toTimestamp(Date.now()) };
  const traced = stepAttemptSpan(call.name, { stepId: call.stepId, attempt, idempotencyKey: `${ctx.workflowId}:${call.stepId}`, workflowType: ctx.workflowType });
  if (lost) return attemptFailed(ctx, op, call, again, request, lostAttemptError(call.stepId, attempt), retry, traced);
  // Journaled before the body runs, so that an attempt whose worker dies still counts (the
  // SDK's own calls, such as ctx.now(), cannot crash a worker).
  if (!internal) {
    /** @type {Record<string, any>} */
    const start = { ...request, attempt_started: true };
    // Beside an output sent ahead, the code went on before the run's latest answer: a cancel
    // requested meanwhile keeps this start out of the journal, and is delivered here instead.
    if (ctx._journal.sendingAhead && !ctx._replay.cancelDelivered && !ctx._holdingCancel) start.unless_cancel_requested = true;
    const answer = await withSpan(traced.span, () => ctx._record('RecordStep', start));
    if (start.unless_cancel_requested && answer?.cancel_requested && !Number(answer?.event_id ?? 0)) {
      traced.span.end();
      await ctx._deliverCancellation(call);
    }
  }
  const pulse = new Pulse();
  const progress = ctx._replay.progress.get(call.stepId);
  const controller = new AbortController();
  const journal = ctx._journal; // the attempt's lease
  const frames = new Frames(
    async (emit) => {
      try {
        return await journal.send('EmitFrames', emit);
      } catch (error) {
        throw classifyJournalError(error);
      }
    },
    { stepId: call.stepId, attempt, log: ctx._log },
  );
  const info = new StepInfo({
    workflowId: ctx.workflowId,
    stepId: call.stepId,
    attempt,
    fence: ctx.fence,
    heartbeatDetails: progress && hasPayload(progress.details) ? fromPayload(progress.details) : null,
    workflowType: ctx.workflowType,
    stepType: call.name,
    signal: controller.signal,
    onHeartbeat: (details) => {
      pulse.beat();
      ctx._heartbeats.queue(call.stepId, attempt, details);
    },
    onEmit: (chunk, stream) => frames.emit(chunk, stream),
  });
  const announce = internal ? null : setTimeout(() => ctx._heartbeats.queue(call.stepId, attempt, undefined), ANNOUNCE_AFTER_MS);
  ctx._steps.add(controller);
  let result;
  try {
    // The attempt's span is current while the step runs: the step's own calls nest in it.
    result = await withSpan(traced.span, () => invokeWithLimits(() => fn(info), { ...limits, pulse }, controller));
  } catch (error) {
    if (ctx._halted) return halted(traced.span);
    if (!(await flushed(ctx, frames))) return halted(traced.span);
    return attemptFailed(ctx, op, call, again, request, error, retry, traced);
  } finally {
    if (announce) clearTimeout(announce);
    ctx._steps.delete(controller);
  }
  if (ctx._halted) return halted(traced.span);
  let encoded;
  try {
    encoded = toPayload(result);
  } catch (error) {
    // retrying would return the same value: fail now
    if (!(await flushed(ctx, frames))) return halted(traced.span);
    return attemptFailed(ctx, op, call, again, request, error, NO_RETRY, traced);
  }
  try {
    await frames.flush(); // the step closes with its frames stored
  } catch (error) {
    if (!(error instanceof JournalRejectedError)) {
      ctx._halt({ kind: 'unavailable', error });
      return halted(traced.span);
    }
    return attemptFailed(ctx, op, call, again, request, error, NO_RETRY, traced);
  }
  const outcome = { ...request, output: encoded };
  try {
    if (!ctx._recordAhead(outcome)) await ctx._record('RecordStep', outcome);
  } catch (error) {
    if (!(error instanceof JournalRejectedError)) throw error;
    // the result breaks the payload limits
    return attemptFailed(ctx, op, call, again, request, error, NO_RETRY, traced);
  }
  stepAttemptEnded(traced);
  // The decoded JSON, exactly what a replay will return.
  return fromPayload(encoded);
}

/**
 * Journal a failed attempt; block until the retry, or throw StepFailedError.
 * @param {WorkflowContext} ctx
 * @param {{done: boolean}} op
 * @param {Call} call
 * @param {(op: {done: boolean}) => Promise<any>} again the step's wait checked again
 * @param {any} request
 * @param {unknown} error
 * @param {RetryPolicy} retry
 * @param {import('./telemetry.js').StepAttemptTrace} traced the attempt's trace, ended here
 */
async function attemptFailed(ctx, op, call, again, request, error, retry, traced) {
  const failure = failureFrom(error);
  const failed = { ...request, failure };
  if (retry.retries(error, request.attempt)) {
    failed.retry_delay = toDuration(retry.delay(request.attempt));
    const answer = await ctx._record('RecordStep', failed);
    stepAttemptEnded(traced, error, timestampMs(answer.retry_time));
    ctx._log.warn(
      `step ${call.stepId} attempt ${request.attempt} failed (${failure.type}: ${failure.message}); next attempt at ${isoOf(answer.retry_time)}`,
    );
    return ctx._block(op, call, { kind: WAIT.RETRY, name: call.stepId, until: answer.retry_time }, again);
  }
  await ctx._record('RecordStep', failed);
  stepAttemptEnded(traced, error);
  throw stepFailed(call.stepId, failure);
}

/**
 * Store the failed attempt's frames before its failure is recorded: false when history could
 * not be reached (the run is halted); frames refused as invalid are logged and dropped.
 * @param {WorkflowContext} ctx
 * @param {Frames} frames
 */
async function flushed(ctx, frames) {
  try {
    await frames.flush();
    return true;
  } catch (error) {
    if (error instanceof JournalRejectedError) {
      ctx._log.warn(`frames of a failed attempt not stored: ${error.message}`);
      return true;
    }
    ctx._halt({ kind: 'unavailable', error });
    return false;
  }
}

/** The run stopped during the attempt: end its span, and never settle. */
function halted(span) {
  span.end();
  return NEVER;
}

function isoOf(ts) {
  const ms = timestampMs(ts);
  return ms === null ? '?' : new Date(ms).toISOString();
}
