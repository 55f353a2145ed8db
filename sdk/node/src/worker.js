// Worker: holds a stream to the scheduler, runs leased workflow and step tasks, heartbeats,
// drains on stop.

import os from 'node:os';
import grpc from '@grpc/grpc-js';
import { JournalRejectedError, JournalUnavailableError, LeaseLostError, PerdureError } from './errors.js';
import { JournalClient } from './journal.js';
import { buildIdOf } from './build.js';
import { cellsOf } from './cells.js';
import { checkResolves, permanent } from './misconfigured.js';
import { LeaseFencedError, LeaseKeeper, taskName } from './leases.js';
import { fromDuration, toDuration } from './payload.js';
import { channelCredentials, clientOptions, loadProtos, statusName } from './proto.js';
import { RetryPolicy } from './retry.js';
import { contextFrom, failed, inSpan, selfFenced } from './telemetry.js';
import { runStepTask, runWorkflowTask } from './runner.js';
import { UsageReport } from './usage.js';
import { DEFAULT_CACHE_BYTES, DEFAULT_CACHE_SIZE, RunCache } from './sticky.js';

const RECONNECT_FIRST_MS = 100;
const RECONNECT_MAX_MS = 5000;
/** How long a stopping worker waits for the scheduler to end its stream after half-closing it. */
const CLOSE_MS = 5000;
/** Timer tasks may come this early; the run waits out the rest (< LOCAL_WAIT_MS) itself. */
const TIMER_LOOKAHEAD_SECONDS = 0.1;

/** A logger printing to the console with a timestamp. */
export const consoleLogger = {
  info: (message) => console.log(`${new Date().toISOString()} INFO perdure.worker: ${message}`),
  warn: (message) => console.warn(`${new Date().toISOString()} WARNING perdure.worker: ${message}`),
  error: (message) => console.error(`${new Date().toISOString()} ERROR perdure.worker: ${message}`),
};

/**
 * @typedef {(ctx: import('./context.js').WorkflowContext, input: any) => Promise<any>} WorkflowFn
 * @typedef {(input: any, info: import('./step-info.js').StepInfo) => any} StepFn
 * @typedef {{
 *   scheduler?: string, history?: string, taskQueue?: string, concurrency?: number,
 *   identity?: string, apiKey?: string, namespace?: string, workflows?: Record<string, WorkflowFn | {run: WorkflowFn, retry?: RetryPolicy}>,
 *   steps?: Record<string, StepFn>, retry?: RetryPolicy, shutdownGraceMs?: number,
 *   cacheSize?: number, cacheBytes?: number, buildId?: string,
 *   cells?: import('./cells.js').Cell[],
 *   logger?: {info: Function, warn: Function, error: Function} | null,
 *   onConnected?: (session: {sessionId: string, heartbeatIntervalMs: number}) => void,
 * }} WorkerOptions
 */

/**
 * The workflows a worker is given (`WorkerOptions.workflows`), by type, each with its steps'
 * default retry policy (`retry` where it names none).
 * @param {Record<string, WorkflowFn | {run: WorkflowFn, retry?: RetryPolicy}>} workflows
 * @param {RetryPolicy} [retry]
 * @returns {Map<string, {fn: WorkflowFn, retry: RetryPolicy}>}
 */
export function workflowEntries(workflows, retry = new RetryPolicy()) {
  const entries = new Map();
  for (const [name, value] of Object.entries(workflows)) {
    if (!name) throw new TypeError('a workflow type name must not be empty');
    if (typeof value === 'function') entries.set(name, { fn: value, retry });
    else if (value && typeof value.run === 'function') {
      if (value.retry !== undefined && !(value.retry instanceof RetryPolicy)) throw new TypeError(`retry of ${name} must be a RetryPolicy`);
      entries.set(name, { fn: value.run, retry: value.retry ?? retry });
    } else throw new TypeError(`workflow ${name} must be a function or {run, retry}`);
  }
  return entries;
}

/**
 * Runs workflows and remote steps from one task queue, at most `concurrency` tasks at a time.
 * `await worker.run()` serves until `worker.stop()` drains it: no new tasks, the steps under
 * way get `shutdownGraceMs` to finish, a workflow is handed back before its next new call, the
 * rest are released.
 *
 * A worker that cannot serve as configured (no key, an invalid, revoked or wrong-role key, an
 * address that does not resolve) does not retry: `run()` rejects with WorkerConfigurationError
 * saying what to fix. A service that cannot be reached is retried with backoff, each attempt
 * logged with its cause.
 *
 * `cells` (or PERDURE_CELLS), instead of `scheduler` and `history`: serve several cells, each a
 * database with its own scheduler and history, with one session per cell; `concurrency` and
 * the run cache are then per cell, and a cell that cannot be reached is retried on its own
 * while the others are served.
 */
export class Worker {
  /** @param {WorkerOptions} options */
  constructor(options = {}) {
    const env = process.env;
    // Addresses given win over PERDURE_CELLS, which wins over the PERDURE_*_ADDRESS variables.
    const named = options.scheduler !== undefined || options.history !== undefined;
    const cells = cellsOf(options.cells, named ? {} : env);
    this.schedulerAddress = cells[0]?.scheduler ?? options.scheduler ?? env.PERDURE_SCHEDULER_ADDRESS ?? 'localhost:7402';
    this.historyAddress = cells[0]?.history ?? options.history ?? env.PERDURE_HISTORY_ADDRESS ?? 'localhost:7401';
    this.taskQueue = options.taskQueue ?? env.PERDURE_TASK_QUEUE ?? 'default';
    this.concurrency = options.concurrency ?? (env.PERDURE_WORKER_CONCURRENCY ? Number(env.PERDURE_WORKER_CONCURRENCY) : 10);
    this.identity = options.identity ?? env.PERDURE_WORKER_IDENTITY ?? `${os.hostname()}:${process.pid}`;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 10_000;
    // A worker key (scoped to a namespace and task queues); sent on every call when set.
    this._apiKey = options.apiKey ?? env.PERDURE_API_KEY;
    this.namespace = options.namespace ?? env.PERDURE_NAMESPACE ?? '';
    const retry = options.retry ?? new RetryPolicy();
    if (!(retry instanceof RetryPolicy)) throw new TypeError('retry must be a RetryPolicy');
    if (!(Number.isInteger(this.concurrency) && this.concurrency >= 1 && this.concurrency <= 10_000)) {
      throw new RangeError('concurrency must be an integer from 1 to 10,000');
    }
    if (typeof this.taskQueue !== 'string' || !this.taskQueue) throw new TypeError('taskQueue must be a non-empty string');
    this._workflows = workflowEntries(options.workflows ?? {}, retry);
    /** @type {Map<string, StepFn>} */
    this._steps = new Map();
    for (const [name, fn] of Object.entries(options.steps ?? {})) {
      if (!name || name.startsWith('$')) throw new TypeError(`step type must be non-empty and not start with '$': ${name}`);
      if (typeof fn !== 'function') throw new TypeError(`step ${name} must be a function`);
      this._steps.set(name, fn);
    }
    if (this._workflows.size === 0 && this._steps.size === 0) {
      throw new TypeError('a worker needs at least one workflow or step type');
    }
    // The version of the code, for routing policies (build.js).
    /** @type {Map<string, Function>} */
    const code = new Map();
    for (const [name, { fn }] of this._workflows) code.set(`workflow:${name}`, fn);
    for (const [name, fn] of this._steps) code.set(`step:${name}`, fn);
    this.buildId = buildIdOf(options.buildId, code);
    this._log = options.logger === null ? { info() {}, warn() {}, error() {} } : (options.logger ?? consoleLogger);
    this._onConnected = options.onConnected;
    // Sticky execution: suspended runs kept to resume (sticky.js), under one id per worker.
    this._cache = new RunCache({
      maxRuns: options.cacheSize ?? numberFrom(env.PERDURE_WORKER_CACHE_SIZE, 'PERDURE_WORKER_CACHE_SIZE', DEFAULT_CACHE_SIZE),
      maxBytes: options.cacheBytes ?? numberFrom(env.PERDURE_WORKER_CACHE_BYTES, 'PERDURE_WORKER_CACHE_BYTES', DEFAULT_CACHE_BYTES),
      log: this._log,
    });
    this.stickyId = this._cache.enabled ? crypto.randomUUID() : '';
    /** @type {LeaseKeeper} leases held now (renewed and fenced while `run` runs) */
    this._keeper = new LeaseKeeper((request, timeoutMs) => this._renewLeases(request, timeoutMs), this._log);
    /** @type {Set<Promise<void>>} */
    this._running = new Set();
    this._call = null; // the welcomed Connect stream
    // TaskDone messages of tasks finished while moving to another scheduler replica, sent once the
    // next session is welcomed. Their leases stay listed until then: the next hello hands them to
    // the new session, the only one whose TaskDone the scheduler takes.
    this._unsent = [];
    this._welcomes = 0;
    this._stopRequested = false;
    this._closing = false;
    this._abort = new AbortController(); // aborted when running tasks are given up
    // Aborted when the worker starts draining: a workflow goes back to the queue before its
    // next new call (the steps under way finish).
    this._stopping = new AbortController();
    this._stopped = new Promise((resolve) => {
      this._requestStop = resolve;
    });
    this._wakeReconnect = () => {};
    // One worker per cell when there are several: each its own sessions, leases and cache.
    /** @type {Worker[]} */
    this._cells =
      cells.length > 1
        ? cells.map((cell) => new Worker({ ...options, cells: [cell], identity: this.identity, buildId: this.buildId }))
        : [];
  }

  /** The workflow types this worker serves, sorted. */
  get workflowTypes() {
    return [...this._workflows.keys()].sort();
  }

  /** Sticky execution's counts: tasks that resumed a kept run (hits), tasks that replayed
   * (misses), runs let go (evictions), and the runs and bytes kept now. */
  get cacheStats() {
    return { ...this._cache.counts, ...this._cache.size };
  }

  /** The remote step types this worker executes, sorted. */
  get stepTypes() {
    return [...this._steps.keys()].sort();
  }

  /** Begin a graceful shutdown; `run()` resolves once it is done. */
  stop() {
    for (const cell of this._cells) cell.stop();
    this._stopRequested = true;
    this._stopping.abort();
    this._cache.close(); // draining: nothing more to resume here
    this._requestStop();
  }

  /**
   * Serve until stopped, reconnecting to the scheduler whenever the stream breaks; reject with
   * WorkerConfigurationError at once if the configuration cannot work.
   */
  async run() {
    if (this._runCalled) throw new PerdureError('run() may be called once');
    this._runCalled = true;
    if (this._cells.length) return this._runCells();
    await checkResolves(this.schedulerAddress, 'scheduler');
    await checkResolves(this.historyAddress, 'history');
    const { TaskService } = loadProtos();
    this._journal = new JournalClient(this.historyAddress, this._apiKey, { buildId: this.buildId });
    this._tasks = new TaskService(this.schedulerAddress, channelCredentials(), clientOptions(this._apiKey));
    this._log.info(
      `worker ${this.identity} starting: build ${this.buildId}, queue ${this.taskQueue}, scheduler ${this.schedulerAddress}, history ${this.historyAddress}`,
    );
    const serving = this._serve();
    try {
      await this._stopped;
      // on the live stream, which keeps carrying heartbeats and TaskDone (unless it gave up)
      if (!this._fatal) await this._drain();
    } finally {
      this._closing = true;
      this._abort.abort();
      this._cache.close();
      this._keeper.stop();
      this._wakeReconnect();
      // A goodbye: half-close, so the scheduler releases what is left at once, then end the
      // stream if the scheduler does not. Tasks given up may still run a body that ignores its
      // signal: then the stream just ends, and their leases expire.
      if (this._running.size) this._endStream?.();
      else this._sayGoodbye?.();
      const closing = setTimeout(() => this._endStream?.(), CLOSE_MS);
      await serving;
      clearTimeout(closing);
      this._tasks.close();
      this._journal.close();
    }
    if (this._fatal) {
      this._log.error(`worker ${this.identity} cannot serve: ${this._fatal.message}`);
      throw this._fatal;
    }
    this._log.info(`worker ${this.identity} stopped`);
  }

  /** Serve every cell until stopped; a configuration that cannot work in one cell stops them
   * all (the same key and code serve every cell). */
  async _runCells() {
    const serving = this._cells.map((cell) =>
      cell.run().catch((error) => {
        this.stop();
        throw error;
      }),
    );
    const outcomes = await Promise.allSettled(serving);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async _serve() {
    let delay = RECONNECT_FIRST_MS;
    let attempt = 0;
    while (!this._closing) {
      const welcomed = this._welcomes;
      try {
        await this._session();
      } catch (error) {
        if (this._closing) break;
        if (error instanceof MovedError) {
          delay = RECONNECT_FIRST_MS;
          continue; // asked to move to another scheduler replica: at once
        }
        const refusal = permanent(error, 'the scheduler', this.schedulerAddress);
        if (refusal) {
          this._fatal = refusal; // no retry can change it: run() rejects with it
          this._requestStop();
          break;
        }
        if (this._welcomes > welcomed) {
          delay = RECONNECT_FIRST_MS; // a session was up: afresh
          attempt = 0;
        }
        attempt += 1;
        const reason = error?.code !== undefined ? `${statusName(error.code)}: ${error.details ?? error.message}` : error?.message;
        this._log.warn(
          `scheduler ${this.schedulerAddress}: stream lost or refused (${reason}); reconnect attempt ${attempt} in ${(delay / 1000).toFixed(1)}s`,
        );
      }
      if (this._closing) break;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, delay);
        this._wakeReconnect = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      delay = Math.min(delay * 2, RECONNECT_MAX_MS);
    }
  }

  /** One Connect stream: hello, welcome, then tasks and revocations until it ends (rejects). */
  _session() {
    return new Promise((_, reject) => {
      const call = this._tasks.Connect();
      let welcomed = false;
      let heartbeats = null;
      let ended = false;
      let moving = false; // asked to reconnect, and half-closed
      const end = (error) => {
        if (ended) return;
        ended = true;
        if (heartbeats) clearInterval(heartbeats);
        if (this._call === call) this._call = null;
        this._endStream = null;
        this._sayGoodbye = null;
        call.removeAllListeners('data');
        try {
          call.cancel(); // an abrupt end: the scheduler keeps the leases until expiry or the next hello
        } catch {
          // already closed
        }
        reject(error);
      };
      this._endStream = () => end(new PerdureError('the worker stopped'));
      this._sayGoodbye = () => {
        if (this._call === call) this._call = null;
        call.end();
      };
      call.on('data', (message) => {
        if (!welcomed) {
          if (message.message !== 'welcome') {
            end(new PerdureError('the scheduler did not welcome this worker'));
            return;
          }
          if (this._closing) {
            // Stopped before the welcome came: renewing leases or heartbeats now would keep
            // a stopped worker's process alive.
            end(new PerdureError('the worker stopped'));
            return;
          }
          welcomed = true;
          this._call = call;
          this._welcomes += 1;
          for (const done of this._unsent.splice(0)) this._taskDone(done); // finished while moving
          const intervalMs = Math.max(50, (fromDuration(message.welcome.heartbeat_interval) ?? 3.333) * 1000);
          this._keeper.configure((fromDuration(message.welcome.lease_ttl) ?? 10) * 1000, intervalMs);
          heartbeats = setInterval(() => this._send({ heartbeat: { leases: this._keeper.refs() } }), intervalMs);
          this._log.info(
            `worker ${this.identity} connected: queue ${this.taskQueue}, workflows ${this.workflowTypes.join(', ') || '-'}, steps ${this.stepTypes.join(', ') || '-'}`,
          );
          if (this._stopRequested) this._send({ drain: {} }); // reconnected while draining
          try {
            this._onConnected?.({ sessionId: message.welcome.session_id, heartbeatIntervalMs: intervalMs });
          } catch (error) {
            this._log.error(`onConnected failed: ${error?.message ?? error}`);
          }
          return;
        }
        if (message.message === 'reconnect') {
          // Half-close: what was sent is still handled; what follows waits for the next session.
          this._log.info(`moving to another scheduler replica: ${message.reconnect.reason}`);
          if (this._call === call) this._call = null;
          call.end();
          moving = true;
          return;
        }
        if (message.message === 'task') this._start(message.task);
        else if (message.message === 'lease_revoked') {
          this._keeper.revoke(message.lease_revoked.lease ?? {}, message.lease_revoked.reason);
        }
      });
      call.on('error', (error) => end(error));
      call.on('end', () => end(moving ? new MovedError() : new PerdureError('the scheduler closed the stream')));
      call.on('status', (status) => {
        if (status.code !== grpc.status.OK) end(Object.assign(new PerdureError(status.details), { code: status.code }));
      });
      const hello = {
        identity: this.identity,
        task_queue: this.taskQueue,
        workflow_types: this.workflowTypes,
        step_types: this.stepTypes,
        capacity: this.concurrency,
        leases: this._keeper.refs(),
        timer_lookahead: toDuration(TIMER_LOOKAHEAD_SECONDS),
        namespace: this.namespace,
        sticky_id: this.stickyId,
        build_id: this.buildId,
      };
      try {
        call.write({ hello });
      } catch (error) {
        end(error);
      }
    });
  }

  _start(task) {
    const stepTask = Boolean(task.step_id);
    const lease = { workflow_id: task.workflow_id, fence: Number(task.fence), step_id: task.step_id ?? '' };
    const fenced = this._keeper.hold(lease, task.lease_expire_time);
    if (!fenced) {
      // Delivered after its deadline (the event loop was stalled, say): it may be another
      // worker's already. Handed back, it is granted again at once rather than when it
      // expires; the release is fenced, so a newer holder's lease is untouched.
      this._log.warn(`${taskName(lease)} (fence ${lease.fence}): the task arrived after its lease's deadline; handing it back`);
      this._taskDone({ lease, unfinished: true });
      return;
    }
    // Aborted when the worker gives its tasks up, or when this lease is fenced.
    const abort = AbortSignal.any([this._abort.signal, fenced]);
    const job = (stepTask ? this._runStep(task, lease, abort) : this._runWorkflow(task, lease, abort))
      .catch((error) => this._log.error(`task of ${task.workflow_id} crashed: ${error?.stack ?? error}`))
      .finally(() => this._running.delete(job));
    this._running.add(job);
  }

  async _runWorkflow(task, lease, abort) {
    this._log.info(`running ${task.workflow_type} ${task.workflow_id} (fence ${task.fence})`);
    await this._finishTask(task, lease, abort, async () => {
      const stopping = this._stopping.signal;
      const ended = await runWorkflowTask(task, this._journal, this._workflows, { log: this._log, abort, stopping, cache: this._cache });
      if (ended === 'handed_back') return 'unfinished';
      return ended === 'suspended' && this._cache.holds(task.workflow_id); // sticky
    });
  }

  async _runStep(task, lease, abort) {
    this._log.info(`running step ${task.step_type} ${task.step_id} of ${task.workflow_id} (fence ${task.fence})`);
    const usage = new UsageReport();
    const run = () => runStepTask(task, this._journal, this._steps, { log: this._log, abort, usage });
    await this._finishTask(task, lease, abort, run, usage);
  }

  /** The span of a task's run: a child of the lease grant, in the workflow's one trace. */
  _taskAttributes(task) {
    /** @type {Record<string, string | number>} */
    const attributes = {
      'perdure.workflow.id': task.workflow_id,
      'perdure.task_queue': this.taskQueue,
      'perdure.fence': Number(task.fence),
      'perdure.worker.identity': this.identity,
    };
    if (task.step_id) Object.assign(attributes, { 'perdure.step.id': task.step_id, 'perdure.step.type': task.step_type });
    else attributes['perdure.workflow.type'] = task.workflow_type;
    return attributes;
  }

  /** Run a task in its span; send TaskDone unless the lease is left to expire. `usage`: a
   * step task's, which its TaskDone carries to settle the step's estimate. */
  _finishTask(task, lease, abort, run, usage = null) {
    const options = { parent: contextFrom(task.trace_context), attributes: this._taskAttributes(task) };
    return inSpan('perdure.task.run', options, (span) => this._settleTask(lease, abort, run, span, usage));
  }

  async _settleTask(lease, abort, run, span, usage) {
    const what = taskName(lease);
    let sticky = false;
    let unfinished = false;
    try {
      const ran = await run();
      sticky = ran === true;
      unfinished = ran === 'unfinished';
    } catch (error) {
      if (abort.reason instanceof LeaseFencedError) {
        selfFenced(span, this.taskQueue);
        return; // dropped when fenced; it expires and is granted again, with a higher fence
      }
      failed(span, error);
      if (error instanceof LeaseLostError) {
        // Still say we are done with it: the release is fenced, a newer holder is untouched.
        this._log.warn(`${what}: lease with fence ${lease.fence} lost, abandoning: ${error.message}`);
      } else if (error instanceof JournalUnavailableError || error instanceof JournalRejectedError) {
        this._log.error(`${what}: journal call failed (${error.message}); leaving it to lease expiry`);
        this._forget(lease);
        return;
      } else {
        this._log.error(`${what}: unexpected error (${error?.stack ?? error}); leaving it to lease expiry`);
        this._forget(lease);
        return;
      }
    }
    if (unfinished) {
      // Handed back while draining, before its next new call: granted again at once.
      span.setAttribute('perdure.task.outcome', 'handed_back');
      this._taskDone({ lease, unfinished: true });
      return;
    }
    // Sticky: the run is kept here, suspended; its next task is offered to this worker first.
    /** @type {Record<string, any>} */
    const done = sticky ? { lease, sticky } : { lease };
    const settled = usage?.forTaskDone();
    if (settled) done.usage = settled;
    this._taskDone(done);
  }

  /** Tell the scheduler the worker is done with a lease, and stop listing it; between two
   * sessions, keep listing it until the next session is welcomed, then tell that one. */
  _taskDone(done) {
    if (!this._call) {
      this._unsent.push(done);
      return;
    }
    this._forget(done.lease);
    this._send({ task_done: done });
  }

  _forget(lease) {
    this._keeper.forget(lease);
  }

  /** TaskService.RenewLeases, as a promise. */
  _renewLeases(request, timeoutMs) {
    return new Promise((resolve, reject) => {
      this._tasks.RenewLeases(request, { deadline: Date.now() + timeoutMs }, (error, response) => (error ? reject(error) : resolve(response)));
    });
  }

  _send(message) {
    const call = this._call;
    if (!call) return;
    try {
      call.write(message);
    } catch {
      // a broken stream is noticed by its listeners, which reconnect
    }
  }

  async _drain() {
    this._send({ drain: {} });
    if (this._running.size === 0) return;
    this._log.info(`draining: waiting up to ${Math.round(this.shutdownGraceMs / 1000)}s for ${this._running.size} running task(s)`);
    let timer;
    await Promise.race([
      Promise.allSettled([...this._running]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, this.shutdownGraceMs);
      }),
    ]);
    clearTimeout(timer);
    if (this._running.size) this._log.warn(`giving up ${this._running.size} running task(s); their leases are left to expire`);
  }
}

/**
 * A whole number from the environment, or `fallback` when unset.
 * @param {string | undefined} value
 * @param {string} name
 * @param {number} fallback
 */
function numberFrom(value, name, fallback) {
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0) throw new RangeError(`${name} must be a whole number, not ${JSON.stringify(value)}`);
  return number;
}

/** The scheduler asked this worker to move its session (Reconnect), and the stream ended. */
class MovedError extends PerdureError {
  constructor() {
    super('moved to another scheduler replica');
  }
}
