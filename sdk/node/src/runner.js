// Advance one workflow under one lease (load, replay, run, close), or execute one remote step
// under a step task's lease (LoadStep, run, RecordStep). A run kept suspended by this worker
// (sticky.js) is resumed from the events since instead of replayed.

import { WorkflowContext } from './context.js';
import {
  BUDGET_EXCEEDED,
  JournalRejectedError,
  JournalUnavailableError,
  NonDeterminismError,
  PerdureError,
  WorkflowCancelledError,
  classifyJournalError,
  lostAttemptError,
} from './errors.js';
import { Frames } from './frames.js';
import { loadJournal } from './pages.js';
import { failureFrom, fromDuration, fromPayload, hasPayload, timestampMs, toDuration, toTimestamp, toPayload } from './payload.js';
import { NO_RETRY, RetryPolicy } from './retry.js';
import { ANNOUNCE_AFTER_MS, HeartbeatSender, Pulse, StepInfo, invokeWithLimits } from './step-info.js';
import { journalBytes } from './sticky.js';
import { UsageReport } from './usage.js';
import { inSpan, setRunAttribute, stepAttemptEnded, stepAttemptSpan, traceEndedWait, waitAttributes, withSpan } from './telemetry.js';

/**
 * @typedef {{fn: (ctx: WorkflowContext, input: any) => Promise<any>, retry: RetryPolicy}} WorkflowEntry
 * @typedef {{call: (method: string, request: object) => Promise<any>}} Journal
 * @typedef {{kind: 'result'|'failure'|'park'|'cancelled'|'continue_as_new'|'suspend'|'lost'|'unavailable'|'handed_back', value?: any, wait?: any,
 *   error?: Error}} Outcome  a Failure or Payload as `value`; the Wait of a suspension; the error of a stop
 */

/**
 * Send one journal call; classify its failure (LeaseLostError, JournalRejectedError,
 * JournalUnavailableError).
 */
async function journalCall(journal, method, request) {
  try {
    return await journal.call(method, request);
  } catch (error) {
    throw classifyJournalError(error);
  }
}

/**
 * Advance the task's workflow as far as it goes. Resolves when the run was suspended, finished
 * or found closed (send TaskDone); throws LeaseLostError (send TaskDone) or
 * JournalUnavailableError / JournalRejectedError (let the lease expire).
 * @param {any} task
 * @param {Journal} journal
 * @param {Map<string, WorkflowEntry>} workflows
 * @param {{log: any, abort?: AbortSignal, stopping?: AbortSignal, onContext?: (ctx: WorkflowContext) => void,
 *   cache?: import('./sticky.js').RunCache}} options  `cache`: runs kept suspended between tasks;
 *   `stopping`: the worker drains (the run is handed back before its next new call: 'handed_back')
 */
export async function runWorkflowTask(task, journal, workflows, { log, abort, stopping, onContext, cache }) {
  const lease = { workflow_id: task.workflow_id, fence: Number(task.fence) };
  // The load that takes the lease up carries the grant's proof: history need not ask the scheduler.
  const taking = { ...lease, lease_proof: task.lease_proof };
  const kept = cache?.take(task.workflow_id) ?? null;
  let loaded = await load(journal, taking, kept ? kept.lastEventId : 0);
  let resumed = null;
  if (kept) {
    resumed = resumable(kept, loaded, lease.fence);
    if (!resumed) {
      cache?.drop(task.workflow_id, kept, 'not resumable');
      // A history that gave the whole journal anyway saves a second load.
      if (!startsAfter(loaded, kept.lastEventId)) loaded = await load(journal, taking, 0);
    }
  }
  const workflow = loaded.workflow ?? {};
  if (workflow.status !== 'WORKFLOW_STATUS_RUNNING') return 'closed'; // an extra dispatch
  if (resumed) cache?.hit();
  else cache?.miss(task.workflow_id, kept ? 'another lease loaded it since, or an event it cannot apply' : '');
  const entry = workflows.get(workflow.workflow_type);
  if (!entry) {
    const served = [...workflows.keys()].sort().join(', ');
    await journalCall(journal, 'FinishWorkflow', {
      ...lease,
      park: {
        type: 'UnknownWorkflowType',
        message: `workflow type '${workflow.workflow_type}' is not registered on this worker (it serves ${served})`,
        stack_trace: '',
      },
    });
    return 'parked';
  }
  traceEndedWait(loaded, timestampMs);
  /** @type {WorkflowContext} */
  let ctx;
  let ended;
  if (resumed) {
    ({ ctx, ended } = resumed);
  } else {
    ctx = new WorkflowContext(loaded, journal, { fence: lease.fence, retry: entry.retry, log });
    onContext?.(ctx);
    ended = begin(entry.fn, ctx, fromPayload(workflow.input));
  }
  ctx._stopping = stopping ?? null;
  let keep = false;
  const onAbort = () => ctx._halt({ kind: 'unavailable', error: new JournalUnavailableError('the worker is shutting down') });
  if (abort) {
    if (abort.aborted) onAbort();
    else abort.addEventListener('abort', onAbort, { once: true });
  }
  try {
    const outcome = await settle(ended, ctx);
    if (outcome.kind === 'lost') throw outcome.error;
    if (outcome.kind === 'unavailable') throw outcome.error;
    setRunAttribute('perdure.task.outcome', outcome.kind);
    if (outcome.kind === 'handed_back') {
      log.info(`workflow ${task.workflow_id} handed back before its next call: the worker is stopping`);
      return 'handed_back';
    }
    if (outcome.kind === 'suspend') {
      /** @type {{kind: string, name: string, until?: any}} */
      const wait = { kind: outcome.wait.kind, name: outcome.wait.name };
      if (outcome.wait.until) wait.until = outcome.wait.until;
      log.info(`workflow ${task.workflow_id} waiting for ${wait.kind} ${wait.name}`);
      const attributes = waitAttributes(wait, timestampMs);
      await inSpan('perdure.suspend', { attributes }, () => journalCall(journal, 'SuspendWorkflow', { ...lease, wait }));
      if (cache?.enabled) {
        const seen = lastEventId(loaded, kept?.lastEventId ?? 0);
        const bytes = journalBytes(loaded, resumed ? kept?.bytes : 0);
        keep = cache.keep(task.workflow_id, { ctx, ended, fence: lease.fence, lastEventId: seen, bytes });
      }
      return 'suspended';
    }
    const finish = { ...lease, [outcome.kind]: outcome.value };
    if (outcome.kind === 'result') log.info(`workflow ${task.workflow_id} completed`);
    else if (outcome.kind === 'cancelled') log.info(`workflow ${task.workflow_id} cancelled`);
    else if (outcome.kind === 'continue_as_new') log.info(`workflow ${task.workflow_id} continued as new`);
    else if (outcome.kind === 'failure') log.info(`workflow ${task.workflow_id} failed: ${outcome.value.type}: ${outcome.value.message}`);
    else log.error(`workflow ${task.workflow_id} parked: ${outcome.value.message}`);
    try {
      await journalCall(journal, 'FinishWorkflow', finish);
    } catch (error) {
      if (!(error instanceof JournalRejectedError) || outcome.kind !== 'result') throw error;
      // The result breaks the payload limits: the run fails, saying so.
      log.error(`workflow ${task.workflow_id} failed: its result was refused: ${error.message}`);
      await journalCall(journal, 'FinishWorkflow', { ...lease, failure: failureFrom(error) });
    }
    return outcome.kind;
  } finally {
    abort?.removeEventListener('abort', onAbort);
    // Whatever the code still runs may no longer write; a run resumed once is refused outright.
    if (!keep) {
      if (resumed) ctx.evict();
      else ctx._halt({ kind: 'done' });
    }
  }
}

/**
 * Load the run's journal after `after` (0: all of it), every page; payloads held by reference
 * are fetched later, when the code reaches them (WorkflowContext._value).
 * @param {Journal} journal
 * @param {{workflow_id: string, fence: number, lease_proof?: Uint8Array}} lease
 * @param {number} after
 */
function load(journal, lease, after) {
  const call = (/** @type {string} */ method, /** @type {object} */ request) => journalCall(journal, method, request);
  return loadJournal(call, lease, after);
}

/**
 * The kept run, resumed under the new lease with the events since, if it may be: nobody else
 * loaded it since it was kept (previous_fence), and the events apply.
 * @param {import('./sticky.js').KeptRun} kept
 * @param {any} loaded the load after the kept position
 * @param {number} fence
 */
function resumable(kept, loaded, fence) {
  if (Number(loaded.previous_fence ?? 0) !== kept.fence) return null;
  if (loaded.workflow?.status !== 'WORKFLOW_STATUS_RUNNING') return null;
  const since = { ...loaded, events: (loaded.events ?? []).filter((e) => Number(e.event_id) > kept.lastEventId) };
  return kept.ctx.resume(since, fence) ? kept : null;
}

/** Whether a load holds only events after `after` (a history may ignore after_event_id). */
function startsAfter(loaded, after) {
  const first = loaded.events?.[0];
  return first !== undefined && Number(first.event_id) > after;
}

/** The id of the last event a load gave, or `before` if it gave none. */
function lastEventId(loaded, before) {
  const events = loaded.events ?? [];
  return events.length ? Number(events[events.length - 1].event_id) : before;
}

/**
 * Run the workflow function against its context. Code that no longer matches its journal parks,
 * whether it found that on its way to a result or while failing or being cancelled.
 * @returns {Promise<Outcome>}
 */
export async function execute(fn, ctx, input) {
  return settle(begin(fn, ctx, input), ctx);
}

/**
 * Start the workflow function: a promise of how it ends (it may stay pending across tasks).
 * @returns {Promise<{kind: 'return', value: any} | {kind: 'throw', error: any}>}
 */
function begin(fn, ctx, input) {
  const running = (async () => fn(ctx, input))();
  return running.then(
    (value) => ({ kind: 'return', value }),
    (error) => ({ kind: 'throw', error }),
  );
}

/**
 * How this task's run of the code ends: it ended, or halted (suspended, parked, stopped).
 * @returns {Promise<Outcome>}
 */
async function settle(code, ctx) {
  const outcome = await run(code, ctx);
  if (!['result', 'failure', 'cancelled', 'continue_as_new'].includes(outcome.kind)) return outcome;
  const leftover = ctx.unconsumedSteps();
  if (!leftover.length) return outcome;
  const ended = { result: 'returned', continue_as_new: 'continued as new' }[outcome.kind] ?? `ended (${outcome.value.type})`;
  const error = new NonDeterminismError(
    `workflow '${ctx.workflowId}' ${ended} without calling recorded step(s) ${leftover.join(', ')}; the code changed in a way that does not replay`,
  );
  return { kind: 'park', value: failureFrom(error) };
}

/** @returns {Promise<Outcome>} */
async function run(code, ctx) {
  let ended = await Promise.race([code, ctx.halted]);
  // The code's end stands once its outputs sent ahead are answered: one refused stops the run.
  if (!ctx._halted && !(await ctx._settledAhead())) ended = ctx._halted;
  // A mismatch found on the way parks the run, whatever the code did after it.
  if (ctx._halted?.kind === 'park') return { kind: 'park', value: ctx._halted.failure };
  switch (ended.kind) {
    case 'return':
      try {
        return { kind: 'result', value: toPayload(ended.value) };
      } catch (error) {
        return { kind: 'failure', value: failureFrom(error) };
      }
    case 'throw':
      if (ended.error instanceof WorkflowCancelledError) return { kind: 'cancelled', value: failureFrom(ended.error) };
      if (ended.error instanceof NonDeterminismError) return { kind: 'park', value: failureFrom(ended.error) };
      return { kind: 'failure', value: failureFrom(ended.error) };
    case 'suspend':
      return { kind: 'suspend', wait: ended.wait };
    case 'park':
      return { kind: 'park', value: ended.failure };
    case 'continue_as_new':
      return { kind: 'continue_as_new', value: { input: ended.input } };
    case 'lost':
    case 'unavailable':
      return { kind: ended.kind, error: ended.error };
    case 'handed_back':
      return { kind: 'handed_back' };
    default:
      return { kind: 'unavailable', error: new JournalUnavailableError('the run was stopped') };
  }
}

/**
 * Execute one remote step under a step task's lease: LoadStep, run the handler with the
 * per-attempt timeout, RecordStep{step_task}. Resolves when done (send TaskDone); throws
 * LeaseLostError (send TaskDone) or JournalUnavailableError (let the lease expire). `usage`
 * takes what the handler reports (zero if it never starts). A task that came with
 * budget_exceeded runs nothing: its attempt is recorded as a final BudgetExceeded failure.
 * @param {any} task
 * @param {Journal} journal
 * @param {Map<string, (input: any, info: StepInfo) => any>} steps
 * @param {{log: any, abort?: AbortSignal, usage?: UsageReport}} options
 */
export async function runStepTask(task, journal, steps, { log, abort, usage: given }) {
  const usage = given ?? new UsageReport(); // journaled with the outcome, TaskDone or not
  const lease = { workflow_id: task.workflow_id, fence: Number(task.fence), step_id: task.step_id };
  // STALE_FENCE, WORKFLOW_CLOSED, STEP_CLOSED: LeaseLostError (TaskDone); anything else,
  // NOT_FOUND included, leaves the lease to expire, as the Python SDK does.
  const loaded = await journalCall(journal, 'LoadStep', { ...lease, lease_proof: task.lease_proof });
  const stepType = loaded.step_type || task.step_type;
  const attempt = Number(loaded.attempt) || 1;
  const retry = RetryPolicy.fromProto(loaded.retry);
  const timeout = fromDuration(loaded.timeout) || null;
  const heartbeatTimeout = fromDuration(loaded.heartbeat_timeout) || null;
  const base = {
    workflow_id: lease.workflow_id,
    fence: lease.fence,
    step_id: lease.step_id,
    step_name: stepType,
    position: 0,
    attempt,
    start_time: toTimestamp(Date.now()),
    step_task: true,
  };
  const record = async (request) => journalCall(journal, 'RecordStep', request);
  if (task.budget_exceeded) return refuseOverBudget(task, base, record, log);
  const traced = stepAttemptSpan(stepType, { stepId: lease.step_id, attempt, idempotencyKey: `${lease.workflow_id}:${lease.step_id}`, workflowType: loaded.workflow_type ?? '' });
  const heartbeats = new HeartbeatSender(
    (stepId, n, details) =>
      journalCall(journal, 'RecordHeartbeat', {
        workflow_id: lease.workflow_id,
        fence: lease.fence,
        step_id: stepId,
        attempt: n,
        step_task: true,
        ...(details === undefined ? {} : { details }),
      }),
    log,
  );
  const frames = new Frames((emit) => journalCall(journal, 'EmitFrames', { ...emit, workflow_id: lease.workflow_id, fence: lease.fence }), {
    stepId: lease.step_id,
    attempt,
    stepTask: true,
    log,
  });
  const fail = async (error, policy) => {
    try {
      await frames.flush(); // the failure is recorded after the attempt's frames
    } catch (refused) {
      if (!(refused instanceof JournalRejectedError)) throw refused;
      log.warn(`frames of step ${lease.step_id} not stored: ${refused.message}`);
    }
    const failure = failureFrom(error);
    /** @type {Record<string, any>} */
    const request = { ...base, failure, ...journaledUsage(usage) };
    if (policy.retries(error, attempt)) {
      request.retry_delay = toDuration(policy.delay(attempt));
      const answer = await record(request);
      stepAttemptEnded(traced, error, timestampMs(answer?.retry_time) ?? Date.now());
      log.warn(`step ${lease.step_id} of ${lease.workflow_id} attempt ${attempt} failed (${failure.type}: ${failure.message}); retried at ${answer?.retry_time ? new Date(Number(answer.retry_time.seconds) * 1000).toISOString() : '?'}`);
      return 'retrying';
    }
    await record(request);
    stepAttemptEnded(traced, error);
    log.warn(`step ${lease.step_id} of ${lease.workflow_id} failed: ${failure.type}: ${failure.message}`);
    return 'failed';
  };

  // The load started no attempt: the last one started was lost with its worker.
  if (loaded.attempt_lost) return fail(lostAttemptError(lease.step_id, attempt), retry);
  const handler = steps.get(stepType);
  if (!handler) {
    const error = new PerdureError(`step type '${stepType}' is not registered on this worker`);
    error.name = 'UnknownStepType';
    return fail(error, NO_RETRY);
  }
  const controller = new AbortController();
  const onAbort = () => controller.abort(abort?.reason ?? new PerdureError('the worker is shutting down'));
  if (abort) {
    if (abort.aborted) onAbort();
    else abort.addEventListener('abort', onAbort, { once: true });
  }
  const info = new StepInfo({
    workflowId: lease.workflow_id,
    stepId: lease.step_id,
    attempt,
    fence: lease.fence,
    heartbeatDetails: hasPayload(loaded.heartbeat_details) ? fromPayload(loaded.heartbeat_details) : null,
    workflowType: loaded.workflow_type ?? '',
    stepType,
    signal: controller.signal,
    onHeartbeat: (details) => {
      pulse.beat();
      heartbeats.queue(lease.step_id, attempt, details);
    },
    onEmit: (chunk, stream) => frames.emit(chunk, stream),
    onUsage: (reported, model) => usage.report(reported, model),
  });
  const pulse = new Pulse();
  const announce = setTimeout(() => heartbeats.queue(lease.step_id, attempt, undefined), ANNOUNCE_AFTER_MS);
  let result;
  usage.start();
  try {
    const body = () => handler(fromPayload(loaded.input), info);
    // The attempt's span is current while the step runs: the step's own calls nest in it.
    result = await withSpan(traced.span, () => invokeWithLimits(body, { limit: timeout, beatLimit: heartbeatTimeout, pulse }, controller));
  } catch (error) {
    if (abort?.aborted) {
      traced.span.end();
      throw new JournalUnavailableError('the worker is shutting down');
    }
    return fail(error, retry);
  } finally {
    usage.end();
    clearTimeout(announce);
    abort?.removeEventListener('abort', onAbort);
  }
  // A body that ignored its signal: its result is dropped (the lease is given up or fenced).
  if (abort?.aborted) traced.span.end();
  if (abort?.aborted) throw new JournalUnavailableError(`the step's work was stopped: ${abort.reason?.message ?? abort.reason}`);
  let encoded;
  try {
    encoded = toPayload(result);
  } catch (error) {
    return fail(error, NO_RETRY); // retrying would return the same value
  }
  try {
    await frames.flush(); // the step closes with its frames stored
    await record({ ...base, output: encoded, ...journaledUsage(usage) });
  } catch (error) {
    if (!(error instanceof JournalRejectedError)) throw error;
    return fail(error, NO_RETRY); // a frame or the result breaks the payload limits
  }
  stepAttemptEnded(traced);
  return 'completed';
}

/**
 * Record the loaded attempt (lost or not: nothing runs either way) as the step's final
 * failure, BudgetExceeded, with the scheduler's word on which budget and by how much.
 */
/**
 * A step task's outcome carries what its handler reported, journaled with it.
 * @param {UsageReport} usage
 */
function journaledUsage(usage) {
  const journaled = usage.forJournal();
  return journaled === null ? {} : { usage: journaled };
}

async function refuseOverBudget(task, base, record, log) {
  await record({ ...base, failure: { type: BUDGET_EXCEEDED, message: task.budget_exceeded, stack_trace: '' } });
  log.warn(`step ${task.step_id} of ${task.workflow_id} (attempt ${base.attempt}) not run: ${task.budget_exceeded}`);
  return 'failed';
}
