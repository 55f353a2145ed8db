// StepInfo: what a running step (local or remote) may hand to the outside world.

import { PerdureError, StepHeartbeatTimeoutError, StepTimeoutError } from './errors.js';
import { checkKey, usageMessage } from './flow.js';
import { toPayload } from './payload.js';

/** A step still running after this long reports itself, so that describe shows it. */
export const ANNOUNCE_AFTER_MS = 1000;

export class StepInfo {
  /**
   * @param {{workflowId: string, stepId: string, attempt: number, fence: number,
   *   heartbeatDetails?: any, workflowType?: string, stepType?: string,
   *   signal?: AbortSignal, onHeartbeat: (details: any) => void,
   *   onEmit?: (chunk: any, stream: string) => void,
   *   onUsage?: (usage: {units: number | string, cost_micros: number | string}, model: string) => void}} fields
   */
  constructor({ workflowId, stepId, attempt, fence, heartbeatDetails = null, workflowType = '', stepType = '', signal, onHeartbeat, onEmit, onUsage }) {
    /** The workflow that runs (or called) the step. */
    this.workflowId = workflowId;
    /** The step's id in the workflow: its name, then "#N" for its N-th occurrence. */
    this.stepId = stepId;
    /** The attempt running now, from 1. */
    this.attempt = attempt;
    /** The lease's fencing token. */
    this.fence = fence;
    /** `workflowId + ":" + stepId`: the same on every attempt and every replay. */
    this.idempotencyKey = `${workflowId}:${stepId}`;
    /** The last `heartbeat(details)` of an earlier attempt, or null. */
    this.heartbeatDetails = heartbeatDetails;
    /** The calling workflow's type (remote steps; for logs). */
    this.workflowType = workflowType;
    /** The step type (remote steps) or name (local steps). */
    this.stepType = stepType;
    /** Aborted when the attempt times out or the worker shuts down. */
    this.signal = signal ?? new AbortController().signal;
    this._onHeartbeat = onHeartbeat;
    this._onEmit = onEmit;
    this._onUsage = onUsage;
    Object.freeze(this);
  }

  /**
   * Record progress `details` (JSON; omit them to only say "still running"). The next attempt
   * of the step, after a failure or a crash, finds the last details in `heartbeatDetails`.
   * Sent in the background; never blocks. Throws TypeError if `details` is not JSON.
   * @param {any} [details]
   */
  heartbeat(details) {
    this._onHeartbeat(details === undefined ? undefined : toPayload(details));
  }

  /**
   * Publish `chunk` (a JSON value; a string for text) on the run's stream `stream`, in order,
   * tagged with this step and attempt: readers get it live (ReadStream). If this attempt
   * fails, readers get a reset of the step's frames before the next attempt's. Sent in the
   * background; never blocks. Throws TypeError for a value that is not JSON, RangeError for a
   * bad stream name or a chunk over 2 MiB, StreamBufferFullError when 50,000 chunks (or 32
   * MiB) are not yet stored by history, PerdureError once the attempt is over.
   * @param {any} chunk
   * @param {string} [stream] default "output"
   */
  emit(chunk, stream = 'output') {
    if (!this._onEmit) throw new PerdureError(`emit() of step '${this.stepId}' is only available inside its running attempt`);
    this._onEmit(chunk, stream);
  }

  /**
   * Report what this attempt used (tokens or other units, money in millionths, and the model
   * that answered for a model call), settling the estimate its remote call declared and
   * journaled with the attempt's outcome; a later report replaces this one. An attempt that
   * reports nothing counts as having used its whole estimate. A local step's report is
   * ignored (only remote steps reserve an estimate). Throws TypeError or RangeError for
   * amounts that are not BigInts or safe integers in [0, 2^63), or a model name that is not 0
   * to 200 printable characters.
   * @param {{units?: number | bigint, costMicros?: number | bigint, model?: string}} usage
   */
  reportUsage(usage) {
    const message = usageMessage(usage);
    const model = usage.model === undefined ? '' : checkKey('model', usage.model);
    this._onUsage?.(message, model);
  }
}

/**
 * Sends the latest progress of each step, one RecordHeartbeat at a time; errors are logged
 * and dropped (progress is best effort: the step's own record decides).
 */
export class HeartbeatSender {
  /**
   * @param {(stepId: string, attempt: number, details: any) => Promise<any>} send
   * @param {{warn: Function}} log
   */
  constructor(send, log) {
    this._send = send;
    this._log = log;
    /** @type {Map<string, {attempt: number, details: any}>} */
    this._pending = new Map();
    this._running = false;
  }

  queue(stepId, attempt, details) {
    const earlier = this._pending.get(stepId);
    // "still running" never replaces details not sent yet
    if (details === undefined && earlier && earlier.attempt === attempt) return;
    this._pending.set(stepId, { attempt, details });
    if (!this._running) this._drain();
  }

  async _drain() {
    this._running = true;
    try {
      while (this._pending.size) {
        const [stepId, { attempt, details }] = this._pending.entries().next().value;
        this._pending.delete(stepId);
        try {
          await this._send(stepId, attempt, details);
        } catch (error) {
          this._log.warn(`heartbeat of step ${stepId} not recorded: ${error?.message ?? error}`);
        }
      }
    } finally {
      this._running = false;
    }
  }
}

/** When a running attempt last showed life: its start, or its last heartbeat(). */
export class Pulse {
  constructor() {
    this.at = Date.now();
  }

  beat() {
    this.at = Date.now();
  }
}

/**
 * Run `fn()` under the attempt's time limits (seconds): `limit` from start to close,
 * `beatLimit` between heartbeats (`pulse` tells when the last was). Over one, abort
 * `controller` (the body's AbortSignal) and throw StepTimeoutError or
 * StepHeartbeatTimeoutError; the late result of the function is ignored.
 * @param {() => any} fn
 * @param {{limit: number|null, beatLimit?: number|null, pulse?: Pulse}} limits
 * @param {AbortController} controller
 */
export async function invokeWithLimits(fn, { limit, beatLimit = null, pulse = new Pulse() }, controller) {
  const running = (async () => fn())();
  if (!(limit > 0) && !(beatLimit > 0)) return running;
  running.catch(() => {}); // a late failure after a time limit is ignored
  const started = Date.now();
  let timer;
  const expired = new Promise((_, reject) => {
    const check = () => {
      const now = Date.now();
      let error = null;
      if (limit > 0 && now - started >= limit * 1000) {
        error = new StepTimeoutError(`the attempt ran longer than its ${limit}s timeout`);
      } else if (beatLimit > 0 && now - pulse.at >= beatLimit * 1000) {
        error = new StepHeartbeatTimeoutError(`the attempt went ${beatLimit}s without calling heartbeat() (its heartbeatTimeout)`);
      }
      if (error) {
        controller.abort(error);
        reject(error);
        return;
      }
      const deadlines = [];
      if (limit > 0) deadlines.push(started + limit * 1000);
      if (beatLimit > 0) deadlines.push(pulse.at + beatLimit * 1000);
      timer = setTimeout(check, Math.max(Math.min(...deadlines) - now, 1));
    };
    check();
  });
  try {
    return await Promise.race([running, expired]);
  } finally {
    clearTimeout(timer);
  }
}
