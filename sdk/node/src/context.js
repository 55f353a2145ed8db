// WorkflowContext: the durable calls workflow code makes (the workflow-facing API).
//
// Each call is matched against the journal by replay.js and executed and recorded only if the
// journal has none (records through the lease's journal client, journal.js; local steps'
// attempts in attempt.js).
//
// Control flow that workflow code must not catch (suspending, non-determinism, a lost lease)
// never throws into the code: the call's promise simply never settles, and the run is halted
// through a promise the runner races against the workflow function. A run suspends once every
// durable call in progress is blocked (on a timer, a signal, a retry or a remote step), so
// that calls made together (ctx.gather) are all scheduled before the run lets go.
//
// With sticky execution (sticky.js) a suspended run is kept: its blocked calls stay pending,
// each with the way to check its wait again, and the next task resumes it (resume) with the
// events recorded since, instead of replaying the code from its first line.

import { APPROVAL_PREFIX, checkApproval, decisionOf, escalationOf, expiredError } from './approvals.js';
import { runAgentLoop } from './agent-loop.js';
import { runLocalStep } from './attempt.js';
import {
  JournalRejectedError,
  LeaseLostError,
  NonDeterminismError,
  PerdureError,
  RunEvictedError,
  SignalTimeoutError,
  WorkflowCancelledError,
  classifyJournalError,
  stepFailed,
} from './errors.js';
import { ChildWorkflowHandle, childFailed, childId, closePolicy } from './children.js';
import { stepFlow } from './flow.js';
import { MODEL_STEP, modelEstimate, modelRequest } from './model-call.js';
import { LeaseJournal, NEVER } from './journal.js';
import { payloadOf } from './pages.js';
import { Patches, checkPatchId, deprecatedMessage } from './patches.js';
import { failureFrom, fromPayload, surelyAccepted, timestampMs, toDuration, toPayload, toTimestamp } from './payload.js';
import { EVENT, INTERNAL_PREFIX, Replay, WAIT, callKind, chooseWait, kindName, recordedCall, ref } from './replay.js';
import { NO_RETRY, RetryPolicy } from './retry.js';
import { runSaga } from './saga.js';
import { HeartbeatSender } from './step-info.js';
import { inSpan, linksTo, timerFired } from './telemetry.js';

export { EVENT, WAIT } from './replay.js';

/** A timer due within this long is waited out in the worker (more than the timer lookahead). */
export const LOCAL_WAIT_MS = 250;

/**
 * @typedef {import('./replay.js').Call} Call
 * @typedef {import('./replay.js').Wait} Wait
 * @typedef {import('./step-info.js').StepInfo} StepInfo
 * @typedef {{kind: 'suspend', wait: Wait} | {kind: 'park', failure: any, error?: NonDeterminismError} | {kind: 'lost', error: Error}
 *   | {kind: 'unavailable', error: Error} | {kind: 'continue_as_new', input: any}
 *   | {kind: 'handed_back'} | {kind: 'done'}} Halt
 * @typedef {{wait: Wait, position: number, stepId: string, remote: any, reject?: (e: Error) => void,
 *   resume: (op: {done: boolean}) => Promise<any>, settle: (value: any) => void}} Blocked
 *   a call waiting for the run to be woken: `resume` checks its wait again, `settle` ends it
 */

/** The journal calls of one lease: `call(method, request)` → response (JournalCallError). */
/** @typedef {{call: (method: string, request: object) => Promise<any>}} Journal */

export class WorkflowContext {
  /**
   * @param {any} loaded a LoadJournalResponse
   * @param {Journal} journal
   * @param {{fence: number, retry?: RetryPolicy, log?: any}} options
   */
  constructor(loaded, journal, { fence, retry = new RetryPolicy(), log = quietLog }) {
    const workflow = loaded.workflow ?? {};
    /** The workflow's id. */
    this.workflowId = workflow.workflow_id;
    /** The workflow's registered type. */
    this.workflowType = workflow.workflow_type;
    /** The lease's fencing token. */
    this.fence = fence;
    this._taskQueue = workflow.task_queue ?? '';
    this._retry = retry;
    this._log = log;
    this._journalClient = journal;
    this._replay = new Replay(loaded);
    this._patches = new Patches(loaded.events);
    this._runId = workflow.run_id ?? '';
    this._runNumber = Number(workflow.run_number ?? 0) || 1;
    this._evicted = false;
    /** @type {AbortSignal | null} the worker drains once aborted (runner.js sets it per task) */
    this._stopping = null;
    this._newTask(loaded, fence);
    // Quiescence: calls in progress, and calls blocked until the run is woken again.
    this._active = 0;
    /** @type {Blocked[]} */
    this._blocked = [];
    /** @type {WeakMap<Promise<any>, {stepId: string, position: number, ready: Promise<void>, gathered: boolean}>} */
    this._remoteCalls = new WeakMap();
    this._quietCheck = false;
    this._holdingCancel = 0; // > 0 while a saga compensates: a cancel request waits (saga.js)
    this._steps = new Set(); // AbortControllers of local step attempts running now
    this._heartbeats = new HeartbeatSender(
      (stepId, attempt, details) =>
        this._journal.send('RecordHeartbeat', { step_id: stepId, attempt, ...(details === undefined ? {} : { details }) }),
      log,
    );
  }

  /**
   * A new workflow task of this run: its lease, its load's clock, and a new halt to race.
   * @param {any} loaded a LoadJournalResponse
   * @param {number} fence
   */
  _newTask(loaded, fence) {
    this.fence = fence;
    // What the database clock said at load: a timer or retry later than this is not due.
    this._nowMs = timestampMs(loaded.now) ?? Date.now();
    // The clock to wait on: read as late in the load as history could (an older history's
    // answer has only `now`), counted from no earlier than the answer's arrival.
    this._clockMs = timestampMs(loaded.clock) ?? this._nowMs;
    this._loadedAt = performance.now();
    this._journal = new LeaseJournal(this._journalClient, this.workflowId, fence, () => {
      this._replay.cancelRequested = true;
    });
    // Halting: the runner races the workflow function against this promise.
    /** @type {Halt|null} */
    this._halted = null;
    this.halted = new Promise((resolve) => {
      this._resolveHalt = resolve;
    });
  }

  /**
   * Resume this run, kept suspended since an earlier task, under a new lease (sticky
   * execution): apply the events recorded since (`loaded` is a load after the kept position),
   * then check every wait again, as a replay of the whole journal would at the same calls.
   * False (nothing resumed) when the events cannot be applied: replay the run instead.
   * @param {any} loaded a LoadJournalResponse of the events after the kept position
   * @param {number} fence
   * @returns {boolean}
   */
  resume(loaded, fence) {
    if (this._evicted || this._active > 0 || !this._replay.extend(loaded.events ?? [], loaded.workflow)) return false;
    this._replay.noteProgress(loaded);
    this._patches.takeIn(loaded.events);
    this._newTask(loaded, fence);
    const blocked = this._blocked.sort((a, b) => a.position - b.position);
    this._blocked = [];
    for (const entry of blocked) entry.settle(this._op((op) => entry.resume(op)));
    return true;
  }

  /**
   * Drop this run for good (the worker's cache let it go): its waiting calls never settle, and
   * any call it makes from now on rejects with RunEvictedError, recording nothing.
   */
  evict() {
    this._evicted = true;
    this._blocked = [];
    this._halt({ kind: 'done' });
  }

  /**
   * The run: its ids, its place in its workflow id's chain, and its journal's size up to the
   * event the code reached (a step's outcome from its next call on; the same on every
   * replay): a loop compares historyLength or
   * historyBytes (payload bytes) with a limit of its own and calls continueAsNew.
   * @returns {{workflowId: string, workflowType: string, runId: string, runNumber: number,
   *   historyLength: number, historyBytes: number}}
   */
  get info() {
    return {
      workflowId: this.workflowId,
      workflowType: this.workflowType,
      runId: this._runId,
      runNumber: this._runNumber,
      historyLength: this._replay.reached,
      historyBytes: this._replay.reachedBytes,
    };
  }

  /**
   * End this run and start the next run of the same workflow id with `input`, in one
   * transaction: the journal starts afresh, and signals this run received and did not consume
   * go to the next run. The returned promise never settles.
   * @param {any} [input]
   * @returns {Promise<any>}
   */
  continueAsNew(input = null) {
    const encoded = toPayload(input); // throws here if it cannot be journaled
    return this._halt({ kind: 'continue_as_new', input: encoded });
  }

  /**
   * Whether this run takes the new code path of patch `patchId`: true for a run that reaches
   * this point on code that has the patch (a new run, or an old one that had not got this far),
   * recorded in the journal so that every replay answers the same; false for a run that went
   * past this point on the old code. The answer is fixed for the run.
   *
   *     const page = ctx.patched('fetch-with-retry') ? await ctx.step('fetch_v2', fetchV2) : await ctx.step('fetch', fetch);
   * @param {string} patchId
   * @returns {boolean}
   */
  patched(patchId) {
    checkPatchId(patchId);
    if (this._evicted) throw this._evictedError();
    const answer = this._patches.patched(patchId, this._replay.position, this._replay.atFrontier());
    for (const marker of this._patches.reached()) this._replay.reachAtNextCall(Number(marker.event_id));
    return answer;
  }

  /**
   * Declare that every open run took the new path of patch `patchId`, once the old path is
   * removed from the code: a run that reaches this point records the marker as `patched` does,
   * and one that went past it on the old code stops and parks (NonDeterminismError naming the
   * patch) instead of running new code over an old journal.
   * @param {string} patchId
   */
  deprecatePatch(patchId) {
    if (this.patched(patchId)) return;
    const message = deprecatedMessage(this.workflowId, patchId);
    this._nondeterminism(message);
    throw new NonDeterminismError(message); // the run parks with the halt, whatever the code does
  }

  // -- the durable calls -------------------------------------------------------------------

  /**
   * Run `fn(info)` and journal its JSON result. On replay a completed step returns its
   * recorded result without running. Each attempt is journaled as it starts, so an attempt
   * whose worker dies counts (WorkerLostError). A failed attempt is retried on the durable
   * schedule of `retry` (default: the workflow's policy); `timeout` (seconds) bounds each
   * attempt, `heartbeatTimeout` (seconds) the time between its info.heartbeat() calls; past
   * either, `info.signal` is aborted and the attempt fails. When attempts run out, or the error
   * is not retryable, StepFailedError is thrown here (and again on every replay).
   * @template T
   * @param {string} name
   * @param {(info: StepInfo) => T | Promise<T>} fn
   * @param {{retry?: RetryPolicy, timeout?: number, heartbeatTimeout?: number}} [options]
   * @returns {Promise<any>}
   */
  step(name, fn, options = {}) {
    checkName(name);
    if (typeof fn !== 'function') throw new TypeError('step needs a function');
    const limits = {
      limit: checkTimeout(options.timeout),
      beatLimit: checkTimeout(options.heartbeatTimeout, 'heartbeatTimeout'),
    };
    const retry = options.retry ?? this._retry;
    if (!(retry instanceof RetryPolicy)) throw new TypeError('retry must be a RetryPolicy');
    const call = this._replay.allocate(name, { step: true });
    return this._op((op) => runLocalStep(this, op, call, fn, retry, limits));
  }

  /**
   * The current time by the database's clock (the one timers and leases use, never this
   * worker's), recorded once so that replay sees the same instant.
   * @returns {Promise<Date>}
   */
  async now() {
    const call = this._replay.allocate('$now', { step: true });
    const moment = () => new Date(this._databaseNow()).toISOString();
    const iso = await this._op((op) => runLocalStep(this, op, call, moment, NO_RETRY, null));
    return new Date(iso);
  }

  /**
   * A random UUID, recorded once so that replay sees the same value.
   * @returns {Promise<string>}
   */
  uuid4() {
    const call = this._replay.allocate('$uuid', { step: true });
    return this._op((op) => runLocalStep(this, op, call, () => crypto.randomUUID(), NO_RETRY, null));
  }

  /**
   * Suspend the workflow for `seconds` (a durable timer on the database clock): no worker
   * holds it meanwhile, and it resumes on any worker, even after restarts.
   * @param {number} seconds
   * @returns {Promise<void>}
   */
  sleep(seconds) {
    if (!(typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0)) {
      throw new RangeError(`sleep needs a finite number of seconds >= 0, not ${seconds}`);
    }
    const call = this._replay.allocate('$sleep');
    return this._op(async (op) => {
      const fire = await this._timer(call, { delay: toDuration(seconds) });
      return this._sleep(op, call, fire);
    });
  }

  /**
   * Suspend the workflow until `moment` (a durable timer, as `sleep`; a moment past fires at
   * once). The journal keeps the due time, so replay waits for the same instant.
   * @param {Date} moment
   * @returns {Promise<void>}
   */
  sleepUntil(moment) {
    if (!(moment instanceof Date) || Number.isNaN(moment.getTime())) {
      throw new TypeError(`sleepUntil needs a valid Date, not ${moment}`);
    }
    const call = this._replay.allocate('$sleep');
    return this._op(async (op) => {
      const fire = await this._timer(call, { fire_time: toTimestamp(moment.getTime()) });
      return this._sleep(op, call, fire);
    });
  }

  /**
   * Consume the oldest signal `name` not consumed yet and return its payload, or suspend until
   * one arrives. With `timeout` (seconds), throw SignalTimeoutError if none arrived in time.
   * @param {string} name
   * @param {{timeout?: number}} [options]
   * @returns {Promise<any>}
   */
  waitForSignal(name, options = {}) {
    checkName(name, 'signal name');
    const timeout = options.timeout;
    if (timeout !== undefined && timeout !== null && !(typeof timeout === 'number' && timeout >= 0 && Number.isFinite(timeout))) {
      throw new RangeError('timeout must be a number of seconds >= 0');
    }
    const timerCall = timeout == null ? null : this._replay.allocate(`$timeout:${name}`);
    return this._op(async (op) => {
      let deadline = null;
      if (timerCall) deadline = await this._timer(timerCall, { delay: toDuration(timeout) });
      const call = await this._begin(`$signal:${name}`);
      if (call.recorded) {
        if (call.recorded.event_type === EVENT.SIGNAL_TIMED_OUT) {
          throw new SignalTimeoutError(`no signal '${name}' within ${timeout}s`);
        }
        return this._value(call.recorded);
      }
      return this._takeSignal(op, call, name, timeout, deadline);
    });
  }

  /** The signal `call` waits for: take it, time out, or block until the run is woken. */
  async _takeSignal(op, call, name, timeout, deadline) {
    const taken = this._replay.takeSignals(name, 1);
    if (taken.length) {
      const payload = await this._value(taken[0]);
      await this._consume(call, name, taken, toPayload(payload));
      return payload;
    }
    if (deadline && deadline.ms <= this._nowMs) {
      await this._record('ConsumeSignals', { ...ref(call), signal_name: name, timed_out: true });
      throw new SignalTimeoutError(`no signal '${name}' within ${timeout}s`);
    }
    const wait = { kind: WAIT.SIGNAL, name, until: deadline ? deadline.ts : null };
    return this._block(op, call, wait, (next) => this._takeSignal(next, call, name, timeout, deadline));
  }

  /**
   * Take every pending signal `name` without waiting (possibly none), oldest first.
   * @param {string} name
   * @returns {Promise<any[]>}
   */
  drainSignals(name) {
    checkName(name, 'signal name');
    const call = this._replay.allocate(`$drain:${name}`);
    return this._op(async () => {
      await this._check(call);
      if (call.recorded) return (await this._value(call.recorded)) ?? [];
      const taken = this._replay.takeSignals(name, Infinity);
      const payloads = [];
      for (const event of taken) payloads.push(await this._value(event));
      await this._consume(call, name, taken, toPayload(payloads));
      return payloads;
    });
  }

  /**
   * Ask a person to approve `details` (JSON) and wait for the decision: an approval record that
   * ApprovalService (`perdure approvals`, the web UI's inbox) lists and decides once. `approvers`
   * (role names, API key ids or names; default: any operator) may decide; after `escalateAfter` seconds
   * undecided it escalates: `escalateTo` may decide too, and `onEscalated` (async) is awaited
   * with the escalation, once, at that point of the code. Resolves with the decision ({approved,
   * approvalId, decidedBy, reason, decidedAt, escalated}); rejects with ApprovalExpiredError when
   * `timeout` seconds pass with no decision (database clock, never early).
   * @param {string} name
   * @param {any} details
   * @param {{timeout: number, escalateAfter?: number, approvers?: string[], escalateTo?: string[],
   *   onEscalated?: (escalation: import('./approvals.js').ApprovalEscalation) => Promise<void>}} options
   * @returns {Promise<import('./approvals.js').ApprovalDecision>}
   */
  approval(name, details, options) {
    checkName(name, 'approval name');
    const { timeout, escalateAfter = null, approvers = [], escalateTo = [], onEscalated = null } = options ?? {};
    checkApproval(timeout, escalateAfter, approvers, escalateTo);
    const encoded = toPayload(details ?? null);
    const call = this._replay.allocate(`${APPROVAL_PREFIX}${name}`);
    return this._op(async (op) => {
      await this._check(call);
      if (call.recorded) {
        if (call.recorded.event_type !== EVENT.APPROVAL_REQUESTED) {
          return this._nondeterminism(
            `workflow '${this.workflowId}': call #${call.position} is approval '${call.stepId}', but the journal recorded a ${kindName(call.recorded)} there`,
            call,
            `approval '${call.stepId}'`,
          );
        }
      } else {
        /** @type {Record<string, any>} */
        const request = { ...ref(call), name, details: encoded, timeout: toDuration(timeout), approvers, escalate_to: escalateTo };
        if (escalateAfter != null) request.escalate_after = toDuration(escalateAfter);
        await this._record('RequestApproval', request);
      }
      return this._approvalOutcome(op, call, name, onEscalated, { told: false });
    });
  }

  /** What became of the approval `call` asked for, or block until the run is woken. */
  async _approvalOutcome(op, call, name, onEscalated, state) {
    const escalated = this._replay.approvalOutcome(call.stepId, EVENT.APPROVAL_ESCALATED);
    if (escalated && !state.told) {
      state.told = true; // before the callback: the code is told once, at this point
      if (onEscalated) await onEscalated(escalationOf(await this._value(escalated), name));
    }
    const decided = this._replay.approvalOutcome(call.stepId, EVENT.APPROVAL_DECIDED);
    if (decided) return decisionOf(await this._value(decided));
    const expired = this._replay.approvalOutcome(call.stepId, EVENT.APPROVAL_EXPIRED);
    if (expired) throw expiredError(await this._value(expired), name);
    await this._interruptible(call.stepId, true);
    const wait = { kind: WAIT.APPROVAL, name: call.stepId, until: null };
    return this._block(op, call, wait, (next) => this._approvalOutcome(next, call, name, onEscalated, state));
  }

  /**
   * Publish `value` under `key`: DescribeWorkflow and QueryWorkflow show the latest one.
   * @param {string} key
   * @param {any} value
   * @returns {Promise<void>}
   */
  setState(key, value) {
    if (typeof key !== 'string' || !key || key.length > 200) {
      throw new RangeError('key must be a string of 1 to 200 characters');
    }
    const encoded = toPayload(value);
    const call = this._replay.allocate(`$state:${key}`);
    return this._op(async () => {
      await this._check(call);
      if (!call.recorded) await this._record('SetState', { ...ref(call), key, value: encoded });
    });
  }

  /**
   * A model call as a remote step (worker-protocol.md §32): the chat request (`model`,
   * `messages`, `maxTokens`, and any other parameter of an OpenAI-compatible API in `params`)
   * is journaled and sent by a worker serving `stepType` (default "model_call", served by
   * modelStep(client)), whose report of the model, tokens and cost is journaled with the step
   * and settles its budgets. Resolves with the response (OpenAI's JSON; modelText() gives its
   * text). It declares `keys` (default ["model:<model>"]) and reserves `estimate` (default:
   * the prompt's UTF-8 bytes plus per-message overhead plus maxTokens, an upper bound for text,
   * and their cost at `prices`). Throws TypeError or RangeError here for a request a provider
   * would refuse.
   * @param {{model: string, messages: Record<string, unknown>[], maxTokens: number, keys?: string[],
   *   prices?: {inputMicrosPerMillion: number | bigint, outputMicrosPerMillion: number | bigint},
   *   estimate?: {units?: number | bigint, costMicros?: number | bigint}, taskQueue?: string, retry?: RetryPolicy,
   *   timeout?: number, stepType?: string, params?: Record<string, unknown>}} options
   * @returns {Promise<any>}
   */
  modelCall({ model, messages, maxTokens, keys, prices, estimate, taskQueue, retry, timeout, stepType = MODEL_STEP, params = {} }) {
    const request = modelRequest(model, messages, maxTokens, params);
    return this.call(stepType, request, {
      taskQueue,
      retry,
      timeout,
      keys: keys ?? [`model:${model}`],
      estimate: estimate ?? modelEstimate(request, prices),
    });
  }

  /**
   * Call a remote step: a worker serving `stepType` on `taskQueue` (default: this workflow's
   * queue) executes it, with retries per `retry` (default: the workflow's policy) and `timeout`
   * seconds per attempt. The call takes its position when made; the run suspends until the
   * outcome arrives. Resolves with the step's result, or rejects with StepFailedError.
   *
   * Flow control (worker-protocol.md §27): `keys` (at most 8, e.g. "provider:openai") put the
   * step under the concurrency, rate and budget limits set on them; `estimate` ({units,
   * costMicros}: BigInts or safe integers) is the most one attempt may use, reserved against
   * every budget that applies before the attempt is granted and settled by what the attempt
   * reports (`info.reportUsage`). A step whose estimate does not fit a budget of a run that
   * fails then rejects with BudgetExceededError (a StepFailedError). Bad keys or estimates
   * throw TypeError or RangeError here, before anything is journaled.
   * @param {string} stepType
   * @param {any} input
   * @param {{taskQueue?: string, retry?: RetryPolicy, timeout?: number, heartbeatTimeout?: number,
   *   keys?: string[], estimate?: {units?: number | bigint, costMicros?: number | bigint}}} [options]
   * @returns {Promise<any>}
   */
  call(stepType, input, options = {}) {
    checkName(stepType, 'step type');
    const timeout = checkTimeout(options.timeout);
    const heartbeatTimeout = checkTimeout(options.heartbeatTimeout, 'heartbeatTimeout');
    const flow = stepFlow(options.keys, options.estimate);
    const retry = options.retry ?? this._retry;
    if (!(retry instanceof RetryPolicy)) throw new TypeError('retry must be a RetryPolicy');
    const taskQueue = options.taskQueue ?? this._taskQueue;
    if (typeof taskQueue !== 'string' || !taskQueue) throw new TypeError('taskQueue must be a non-empty string');
    const encoded = toPayload(input);
    const call = this._replay.allocate(stepType);
    // Settles once the call is journaled (or found in the journal): what gather waits for.
    let scheduled;
    const ready = new Promise((resolve, reject) => {
      scheduled = { resolve, reject };
    });
    ready.catch(() => {});
    const remote = { stepId: call.stepId, position: call.position, ready, gathered: false };
    const promise = this._op(async (op) => {
      try {
        await this._check(call);
        if (call.recorded) {
          if (call.recorded.event_type !== EVENT.STEP_SCHEDULED) {
            return this._nondeterminism(
              `workflow '${this.workflowId}': call #${call.position} is remote step '${call.stepId}', but the journal recorded a ${kindName(call.recorded)} there`,
              call,
              `remote step '${call.stepId}'`,
            );
          }
        } else {
          /** @type {Record<string, any>} */
          const request = { ...ref(call), task_queue: taskQueue, input: encoded, retry: retry.toProto() };
          if (timeout !== null) request.timeout = toDuration(timeout);
          if (heartbeatTimeout !== null) request.heartbeat_timeout = toDuration(heartbeatTimeout);
          if (flow !== null) request.flow = flow;
          await this._record('ScheduleStep', request);
        }
      } catch (error) {
        scheduled.reject(error);
        throw error;
      }
      scheduled.resolve();
      return this._remoteOutcome(op, call, remote);
    });
    this._remoteCalls.set(promise, remote);
    return promise;
  }

  /**
   * Start a child workflow of `workflowType` with `input` on `taskQueue` (default: this
   * workflow's), in this workflow's namespace; resolves to its handle (`workflowId`, `runId`,
   * `result()`) once the start is journaled, with the child's run, in one transaction: the
   * child starts exactly once, however often this code runs again. `id`: default
   * "<this workflow's id>-child-<position>" ("-run-<n>" appended in the n-th run of a chain).
   * An id an open run holds starts nothing: result() throws ChildWorkflowFailedError
   * ("WorkflowAlreadyStarted"). `parentClosePolicy`: what this run's close does to the child if
   * it is still open: 'terminate' (default), 'request_cancel' or 'abandon'.
   * @param {string} workflowType
   * @param {any} input
   * @param {{id?: string, taskQueue?: string, parentClosePolicy?: string}} [options]
   * @returns {Promise<ChildWorkflowHandle>}
   */
  startChild(workflowType, input, options = {}) {
    checkName(workflowType, 'workflow type');
    const policy = closePolicy(options.parentClosePolicy ?? 'terminate');
    const taskQueue = options.taskQueue ?? this._taskQueue;
    if (typeof taskQueue !== 'string' || !taskQueue) throw new TypeError('taskQueue must be a non-empty string');
    const workflowId = childId(this.workflowId, this._runNumber, this._replay.position, options.id);
    const encoded = toPayload(input);
    const call = this._replay.allocate(workflowType);
    return this._op(async () => {
      await this._check(call);
      const recorded = call.recorded;
      if (recorded) {
        if (recorded.event_type !== EVENT.CHILD_WORKFLOW_STARTED) {
          return this._nondeterminism(
            `workflow '${this.workflowId}': call #${call.position} is child workflow '${call.stepId}', but the journal recorded a ${kindName(recorded)} there`,
            call,
            `child workflow '${call.stepId}'`,
          );
        }
        return new ChildWorkflowHandle(this, call, recorded.child_workflow_id ?? '', recorded.child_run_id ?? '');
      }
      const request = { ...ref(call), child_workflow_id: workflowId, task_queue: taskQueue, input: encoded, parent_close_policy: policy };
      const started = await this._record('StartChild', request);
      const runId = started?.child_run_id ?? '';
      if (!runId) {
        // An open run holds the id: history journaled the call's failure with it, which a
        // replay finds; this run learns it from the answer.
        this._replay.childOutcomes.set(call.stepId, {
          event_type: EVENT.CHILD_WORKFLOW_FAILED,
          step_id: call.stepId,
          failure: started?.failure ?? {},
          child_workflow_id: workflowId,
          child_run_id: '',
          name: '',
        });
      }
      return new ChildWorkflowHandle(this, call, workflowId, runId);
    });
  }

  /**
   * Run a child workflow to its end (startChild, then its result): its result, or
   * ChildWorkflowFailedError if it failed, was cancelled or terminated, or could not start.
   * @param {string} workflowType
   * @param {any} input
   * @param {{id?: string, taskQueue?: string, parentClosePolicy?: string}} [options]
   * @returns {Promise<any>}
   */
  child(workflowType, input, options = {}) {
    return this.startChild(workflowType, input, options).then((handle) => handle.result());
  }

  /**
   * A child's result (ChildWorkflowHandle.result): its outcome, or block until the run is woken.
   * @param {Call} call the child call
   */
  _childResult(call) {
    const interruptible = { gathered: false }; // a cancellation may end the wait, as a remote step's
    return this._op((op) => this._childOutcome(op, call, interruptible));
  }

  async _childOutcome(op, call, interruptible) {
    const outcome = this._replay.childOutcomes.get(call.stepId);
    if (outcome) {
      // A cancellation delivered while this call waited is thrown here again on replay.
      await this._interruptible(call.stepId, false);
      if (outcome.event_type === EVENT.CHILD_WORKFLOW_FAILED) throw childFailed(call.stepId, outcome);
      return this._value(outcome);
    }
    const wait = { kind: WAIT.CHILD, name: call.stepId, until: null };
    return this._block(op, call, wait, (next) => this._childOutcome(next, call, interruptible), interruptible);
  }

  /** A remote call's outcome, or block until the run is woken. */
  async _remoteOutcome(op, call, remote) {
    const outcome = this._replay.remoteOutcomes.get(call.stepId);
    // A cancellation delivered while this call waited is thrown here again on replay, even
    // if the outcome came since (a call in a gather: the gather does it; a pending call:
    // when the run would suspend, see _onQuiet).
    if (outcome && !remote.gathered) await this._interruptible(call.stepId, false);
    if (outcome) {
      if (outcome.event_type === EVENT.STEP_FAILED) throw stepFailed(call.stepId, outcome.failure ?? {});
      return this._value(outcome);
    }
    const wait = { kind: WAIT.STEP, name: call.stepId, until: null };
    return this._block(op, call, wait, (next) => this._remoteOutcome(next, call, remote), remote);
  }

  /**
   * Wait for all of `calls` (promises of ctx.call, ctx.step..., or child handles; they took
   * their positions when made, in call order) and return their results in that order. All
   * settle first; then the first failure in call order is thrown. A cancellation delivered to
   * any of them is thrown at once.
   * @param {Iterable<Promise<any> | ChildWorkflowHandle>} calls
   * @returns {Promise<any[]>}
   */
  gather(calls) {
    // A child's handle stands for its result.
    const list = [...calls].map((call) => (call instanceof ChildWorkflowHandle ? call.result() : call));
    const remotes = list.map((promise) => this._remoteCalls.get(promise));
    if (list.length && remotes.every(Boolean)) return this._gatherRemote(list, remotes);
    return settleAll(list);
  }

  /**
   * Remote calls side by side, as the Python SDK's gather: once all are journaled, a
   * cancellation requested while any is pending is delivered at the next position as
   * "<first call's step id>:cancelled" (replay throws it there again); otherwise the run waits
   * for the first pending one; with all outcomes in, results in call order.
   */
  _gatherRemote(list, remotes) {
    for (const remote of remotes) remote.gathered = true; // their interruption is ours
    return this._op(async (op) => {
      await Promise.all(remotes.map((remote) => remote.ready));
      return this._gathered(op, list, remotes);
    });
  }

  /** The gathered calls' results once all outcomes are in; else block on the first pending. */
  async _gathered(op, list, remotes) {
    const pending = remotes.filter((remote) => !this._replay.remoteOutcomes.has(remote.stepId));
    await this._interruptible(remotes[0].stepId, pending.length > 0);
    if (!pending.length) return settleAll(list);
    const first = pending[0];
    const call = { position: first.position, stepId: first.stepId, name: '', recorded: null };
    return this._block(op, call, { kind: WAIT.STEP, name: first.stepId, until: null }, (next) => this._gathered(next, list, remotes));
  }

  /**
   * A cancellation requested while the code waits at the call `stepId` (a timer, remote steps)
   * ends the wait: it is delivered at the next position, "<step id>:cancelled", and replay
   * throws it there again, whatever happened to the wait since.
   */
  async _interruptible(stepId, waiting) {
    if (this._replay.interrupts(stepId, waiting && this._holdingCancel === 0)) {
      await this._begin(`${stepId}:cancelled`); // records or replays the delivery, and throws it
      throw this._cancellation();
    }
  }

  /**
   * Run `body(saga)` with compensations for its work: after each step that needs undoing,
   * `saga.addCompensation(name, fn)` (or `saga.addRemoteCompensation(stepType, input)`). If the
   * body throws (or the run is cancelled in it), they run as durable steps, last first, and the
   * error is thrown again (worker-protocol.md §30; saga.js).
   * @template T
   * @param {(saga: import('./saga.js').Saga) => Promise<T>} body
   * @returns {Promise<T>}
   */
  saga(body) {
    return runSaga(this, body);
  }

  /**
   * A standing objective: `takeTurn(turn)` until the objective is met, a person abandons it,
   * or its turns or budget run out, steered by signals between turns (worker-protocol.md §31;
   * agent-loop.js). Resolves with {reason, turns, objective, state, spent, guidance}.
   * @param {(turn: import('./agent-loop.js').Turn) => Promise<{state: any, units?: number}>} takeTurn
   * @param {import('./agent-loop.js').AgentLoopOptions} options
   * @returns {Promise<import('./agent-loop.js').AgentLoopResult>}
   */
  agentLoop(takeTurn, options) {
    return runAgentLoop(this, takeTurn, options);
  }

  /** Recorded calls the code has not reached: non-deterministic if the run is ending. */
  unconsumedSteps() {
    return this._replay.unconsumed();
  }

  // -- internals ---------------------------------------------------------------------------

  /** Allocate a call and check it against the journal. */
  async _begin(name) {
    const call = this._replay.allocate(name);
    await this._check(call);
    return call;
  }

  /**
   * Check a call against the journal; deliver a pending cancellation here if the code has not
   * seen it yet (the call is then not executed).
   * @param {Call} call
   * @param {{step?: boolean}} [options] `step`: a local step's call, whose start goes beside
   *   the outputs sent ahead
   */
  async _check(call, { step = false } = {}) {
    const recorded = call.recorded;
    if (recorded) {
      const mismatch = this._replay.mismatch(this.workflowId, call);
      if (mismatch) return this._nondeterminism(mismatch, call, callKind(call.stepId));
      if (recorded.event_type === EVENT.CANCELLATION_DELIVERED) throw this._cancellation();
      return undefined;
    }
    if (this._stopping?.aborted) {
      // The worker drains: the run goes back to the queue before this new call, once its
      // outputs sent ahead are answered (no lease goes back with an outcome on its way).
      if (!(await this._settledAhead())) return NEVER;
      return this._halt({ kind: 'handed_back' });
    }
    // A cancel request an output's answer reports is delivered here: wait for that answer (a
    // step's start goes beside it instead, and history keeps it out: attempt.js).
    if (!step && !(await this._settledAhead())) return NEVER;
    if (this._cancelPending) await this._deliverCancellation(call);
    return undefined;
  }

  /** A cancel request the code is yet to have, and may have at its next call. */
  get _cancelPending() {
    return this._replay.cancelRequested && !this._replay.cancelDelivered && this._holdingCancel === 0;
  }

  /**
   * Run `fn` with the run's cancel request held back: no call delivers it meanwhile (a saga's
   * compensations run to their end); the first call after does, as usual.
   * @template T
   * @param {() => Promise<T>} fn
   * @returns {Promise<T>}
   */
  async holdCancellation(fn) {
    this._holdingCancel += 1;
    try {
      return await fn();
    } finally {
      this._holdingCancel -= 1;
    }
  }

  _cancellation() {
    const reason = this._replay.cancelReason ? `: ${this._replay.cancelReason}` : '';
    return new WorkflowCancelledError(`workflow '${this.workflowId}' was cancelled${reason}`);
  }

  /**
   * Park the run: the code's call `call` (read as `found`), where given, does not match the
   * journal.
   * @param {string} message
   * @param {Call} [call]
   * @param {string} [found]
   */
  _nondeterminism(message, call, found = '') {
    const expected = call?.recorded ? recordedCall(call.recorded) : '';
    const error = new NonDeterminismError(message, { position: call?.position ?? null, expected, found });
    return this._halt({ kind: 'park', failure: failureFrom(error), error });
  }

  /**
   * Stop the run: every call of the code still going never settles, and the runner acts on
   * `outcome`. The first halt wins. Returns a promise that never settles.
   * @param {Halt} outcome
   */
  _halt(outcome) {
    if (!this._halted) {
      this._halted = outcome;
      for (const controller of this._steps) controller.abort(new PerdureError('the workflow run stopped'));
      this._resolveHalt(outcome);
    }
    return NEVER;
  }

  /**
   * Stop the run for a journal call that failed (classified): its lease was lost, or the
   * journal is unavailable.
   * @param {Error} error
   */
  _haltFor(error) {
    return this._halt({ kind: error instanceof LeaseLostError ? 'lost' : 'unavailable', error });
  }

  /**
   * Journal the delivery of the run's cancel request at `call` (which is then not executed),
   * and throw it.
   * @param {Call} call
   */
  async _deliverCancellation(call) {
    this._replay.cancelDelivered = true;
    await this._record('RecordCancellation', ref(call));
    throw this._cancellation();
  }

  /**
   * Track one durable call: the run suspends only when none is in progress.
   * @param {(op: {done: boolean}) => Promise<any>} fn
   */
  _op(fn) {
    if (this._evicted) {
      const refused = Promise.reject(this._evictedError());
      refused.catch(() => {}); // rejected for the code that awaits it, never for the process
      return refused;
    }
    const op = { done: false };
    this._active++;
    const promise = fn(op);
    const finish = () => this._opDone(op);
    promise.then(finish, finish);
    promise.catch(() => {}); // a call the code never awaits must not crash the process
    return promise;
  }

  _opDone(op) {
    if (op.done) return;
    op.done = true;
    this._active--;
    this._scheduleQuietCheck();
  }

  _evictedError() {
    return new RunEvictedError(`workflow '${this.workflowId}': this run was let go by the worker's cache; it goes on from its journal`);
  }

  /**
   * The call cannot go on until the run is woken again: its promise settles only when a later
   * task resumes the run (resume calls `again` then) or, for a remote step, when a
   * cancellation interrupts it; the run suspends once nothing else is going on.
   * @param {{done: boolean}} op
   * @param {Call} call
   * @param {Wait} wait
   * @param {(op: {done: boolean}) => Promise<any>} again checks the wait again, in a new op
   * @param {{gathered: boolean}} [remote] a remote call, which a cancellation may interrupt
   */
  _block(op, call, wait, again, remote = null) {
    if (this._halted) return NEVER;
    /** @type {Blocked} */
    let entry;
    const promise = new Promise((resolve, reject) => {
      entry = { wait, position: call.position, stepId: call.stepId, remote, resume: again, settle: resolve };
      if (remote) entry.reject = reject;
    });
    this._blocked.push(entry);
    this._opDone(op);
    return promise;
  }

  _scheduleQuietCheck() {
    if (this._halted || this._active > 0 || this._blocked.length === 0 || this._quietCheck) return;
    this._quietCheck = true;
    // After every continuation the code has queued: one of them may make another call.
    setImmediate(() => {
      this._quietCheck = false;
      if (this._halted || this._active > 0 || this._blocked.length === 0) return;
      this._onQuiet();
    });
  }

  /** Every call in progress is blocked: deliver a cancellation to a remote step, or suspend. */
  _onQuiet() {
    const blocked = [...this._blocked].sort((a, b) => a.position - b.position);
    const remote = blocked.filter((entry) => entry.reject && !entry.remote.gathered);
    if (remote.length) {
      // As a timer that has not fired (Python's _sleep): a cancellation pending while remote
      // steps are outstanding is delivered at the next position, "<step id>:cancelled".
      const following = this._replay.following();
      let target = null;
      if (following && following.event_type === EVENT.CANCELLATION_DELIVERED) {
        target = remote.find((entry) => following.step_id === `${entry.stepId}:cancelled`) ?? null;
      }
      if (!target && this._cancelPending) target = remote[0];
      if (target) {
        this._blocked.splice(this._blocked.indexOf(target), 1);
        const reject = target.reject;
        this._op(async () => {
          try {
            await this._begin(`${target.stepId}:cancelled`); // records or replays it, and throws
            reject(this._cancellation());
          } catch (error) {
            reject(error);
          }
        });
        return;
      }
    }
    this._halt({ kind: 'suspend', wait: chooseWait(blocked) });
  }

  /**
   * Send a journal record of this lease, one at a time; note a cancel request the answer
   * reports. A lost lease or an unreachable history halts the run; a refused request throws
   * JournalRejectedError.
   * @param {string} method
   * @param {object} request
   */
  /**
   * The decoded payload of a recorded event, fetched now if the journal holds it by reference
   * (a large one): only the values the code reaches are ever in memory.
   * @param {any} event a HistoryEvent
   */
  async _value(event) {
    if (!event.payload_ref) return fromPayload(event.payload);
    if (this._halted) return NEVER;
    let payload;
    try {
      payload = await payloadOf((method, request) => this._journal.send(method, request), event);
    } catch (error) {
      return this._haltFor(classifyJournalError(error));
    }
    if (this._halted) return NEVER;
    return fromPayload(payload);
  }

  async _record(method, request) {
    if (this._evicted) throw this._evictedError();
    if (this._halted) return NEVER;
    // Queued first, in this same turn: the lease's records go out in the order queued.
    const markers = this._patches.unsent().map((marker) => this._send('RecordPatch', marker));
    const [response] = await Promise.all([this._send(method, request), ...markers]);
    return response;
  }

  /**
   * Send a step's output without waiting for its answer (LeaseJournal.recordAhead), when
   * history is sure to take it as it is; false: record it as any other. Its outcome counts in
   * ctx.info from the code's next call, once answered (a replay counts it at that call too).
   * @param {object} request a RecordStep request with its output
   */
  _recordAhead(request) {
    if (this._evicted || this._halted || this._patches.hasUnsent() || !surelyAccepted(request.output)) return false;
    const later = this._replay.reachAtNextCall(null, payloadBytes(request));
    this._journal.recordAhead(request, () => Boolean(this._halted)).then(
      (response) => this._replay.answered(later, Number(response?.event_id ?? 0)),
      (error) => this._haltFor(error),
    );
    return true;
  }

  /**
   * Wait for the outputs sent ahead; false (the run halted) if one was refused.
   * @returns {Promise<boolean>}
   */
  async _settledAhead() {
    if (!this._journal.sendingAhead) return !this._halted;
    try {
      await this._journal.settle();
    } catch (error) {
      this._haltFor(error);
    }
    return !this._halted;
  }

  /**
   * @param {string} method
   * @param {object} request
   */
  async _send(method, request) {
    let response;
    try {
      response = await this._journal.record(method, request, () => Boolean(this._halted));
    } catch (error) {
      if (error instanceof JournalRejectedError) throw error;
      return this._haltFor(error);
    }
    if (this._halted) return NEVER;
    const eventId = Number(response?.event_id ?? 0);
    if (method !== 'RecordStep') {
      this._replay.reach(eventId);
      this._replay.reachedBytes += payloadBytes(request);
    } else if (!request.attempt_started && request.retry_delay == null) {
      // A step's outcome counts from the code's next call; an attempt's start or failure is
      // no call's event (a replay does not reach them either).
      this._replay.reachAtNextCall(eventId, payloadBytes(request));
    }
    return response;
  }

  /**
   * Start (or replay) a timer firing after a `delay` or at a `fire_time`; its fire time as {ms, ts}.
   * @param {Call} call
   * @param {{delay: any} | {fire_time: any}} fire
   */
  async _timer(call, fire) {
    await this._check(call);
    if (call.recorded) return { ms: timestampMs(call.recorded.due_time), ts: call.recorded.due_time };
    const started = await this._record('StartTimer', { ...ref(call), ...fire });
    return { ms: timestampMs(started.fire_time), ts: started.fire_time };
  }

  /**
   * Wait for the timer of `call`. A cancellation requested before it fires ends the wait: it
   * is delivered at the call right after the timer, "<timer step id>:cancelled", and replay
   * throws it there again, whatever the time by then.
   */
  async _sleep(op, call, fire) {
    await this._interruptible(call.stepId, fire.ms > this._nowMs);
    if (fire.ms <= this._nowMs) return undefined;
    if (fire.ms - this._databaseNow() > LOCAL_WAIT_MS) {
      return this._block(op, call, { kind: WAIT.TIMER, name: call.stepId, until: fire.ts }, (next) => this._sleep(next, call, fire));
    }
    // Due soon: wait here, with the lease, on a clock never ahead of the database's; a timer
    // may fire a little early, so look at the clock again after it.
    for (let remaining = fire.ms - this._databaseNow(); remaining > 0; remaining = fire.ms - this._databaseNow()) {
      await new Promise((resolve) => setTimeout(resolve, Math.ceil(remaining)));
      if (this._halted) return NEVER;
    }
    timerFired(fire.ms, this._databaseNow(), { 'perdure.workflow.id': this.workflowId, 'perdure.step.id': call.stepId });
    return undefined;
  }

  /** The database clock now, never ahead of it: its time at the end of the load, plus the time since the answer came. */
  _databaseNow() {
    return this._clockMs + (performance.now() - this._loadedAt);
  }

  async _consume(call, name, taken, result) {
    const request = { ...ref(call), signal_name: name, event_ids: taken.map((event) => Number(event.event_id)), result };
    // Linked to the spans that received the signals, which link to this workflow's trace.
    const links = linksTo(taken.map((event) => event.trace_context));
    const attributes = { 'perdure.signal.name': name, 'perdure.signal.count': taken.length };
    await inSpan('perdure.signal.consume', { links, attributes }, () => this._record('ConsumeSignals', request));
  }
}

/** The bytes of the payloads a record carries (its output, value, input...). */
function payloadBytes(request) {
  let total = 0;
  for (const value of Object.values(request ?? {})) {
    if (value && typeof value === 'object' && value.data?.length !== undefined && 'encoding' in value) total += value.data.length;
  }
  return total;
}

export function checkName(name, what = 'step name') {
  if (typeof name !== 'string' || !name || name.startsWith(INTERNAL_PREFIX)) {
    throw new TypeError(`${what} must be a non-empty string not starting with '$': ${JSON.stringify(name)}`);
  }
}

function checkTimeout(timeout, what = 'timeout') {
  if (timeout === undefined || timeout === null) return null;
  if (!(typeof timeout === 'number' && Number.isFinite(timeout) && timeout > 0)) {
    throw new RangeError(`${what} must be a positive number of seconds`);
  }
  return timeout;
}

const quietLog = { info() {}, warn() {}, error() {} };

/** Wait for every promise; results in order, or the first failure in order (a cancellation
 * at once). */
function settleAll(list) {
  return new Promise((resolve, reject) => {
    const results = new Array(list.length);
    /** @type {({error: unknown}|undefined)[]} */
    const errors = new Array(list.length);
    let left = list.length;
    if (left === 0) resolve([]);
    const settled = () => {
      if (--left > 0) return;
      const first = errors.find(Boolean);
      if (first) reject(first.error);
      else resolve(results);
    };
    list.forEach((promise, i) => {
      Promise.resolve(promise).then(
        (value) => {
          results[i] = value;
          settled();
        },
        (error) => {
          if (error instanceof WorkflowCancelledError) {
            reject(error);
            return;
          }
          errors[i] = { error };
          settled();
        },
      );
    });
  });
}
