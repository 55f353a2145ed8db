// Sticky execution: the worker's cache of suspended runs. A workflow task that ends because the
// run waits keeps the run (its pending code, context and replay state) here, and tells the
// scheduler (TaskDone.sticky) to offer the run's next task to this worker first; that task
// loads only the events since and resumes the code where it waits, instead of replaying it
// from its first line (runner.js). Correctness never depends on it: a run not found here, or
// loaded by another lease since, is replayed from its journal as ever.
//
// Bounded by a count of runs and by a byte budget estimated from their journals, least
// recently used first out. A run let go is evicted (its context refuses any further call).

/** Runs kept at most (PERDURE_WORKER_CACHE_SIZE); 0 turns sticky execution off. */
export const DEFAULT_CACHE_SIZE = 500;
/** The journals' bytes the kept runs may add up to (PERDURE_WORKER_CACHE_BYTES). */
export const DEFAULT_CACHE_BYTES = 256 * 1024 * 1024;

/**
 * A run kept between its tasks.
 * @typedef {{
 *   ctx: import('./context.js').WorkflowContext,
 *   ended: Promise<any>,
 *   fence: number,
 *   lastEventId: number,
 *   bytes: number,
 * }} KeptRun  `ended` settles when the code returns or throws; `fence` is the lease it was kept
 *   under; `lastEventId` the last event of the journal it has seen; `bytes` its journal's size
 */

export class RunCache {
  /**
   * @param {{maxRuns?: number, maxBytes?: number, log?: {info: Function}}} [options]
   */
  constructor({ maxRuns = DEFAULT_CACHE_SIZE, maxBytes = DEFAULT_CACHE_BYTES, log } = {}) {
    if (!(Number.isInteger(maxRuns) && maxRuns >= 0)) throw new RangeError(`cacheSize must be an integer >= 0, not ${maxRuns}`);
    if (!(Number.isInteger(maxBytes) && maxBytes > 0)) throw new RangeError(`cacheBytes must be an integer > 0, not ${maxBytes}`);
    this.maxRuns = maxRuns;
    this.maxBytes = maxBytes;
    this._log = log;
    /** @type {Map<string, KeptRun>} workflow id -> run, least recently kept first */
    this._runs = new Map();
    this._bytes = 0;
    /** Tasks that resumed a kept run, tasks that replayed (nothing kept, or not resumable), runs let go. */
    this.counts = { hits: 0, misses: 0, evictions: 0 };
  }

  /** Whether runs are kept at all. */
  get enabled() {
    return this.maxRuns > 0;
  }

  /** How many runs are kept, and their estimated bytes. */
  get size() {
    return { runs: this._runs.size, bytes: this._bytes };
  }

  /** @param {string} workflowId */
  holds(workflowId) {
    return this._runs.has(workflowId);
  }

  /**
   * Take a kept run out, for the task that resumes it (or null): while its task runs it is not
   * the cache's to evict.
   * @param {string} workflowId
   * @returns {KeptRun | null}
   */
  take(workflowId) {
    const run = this._runs.get(workflowId);
    if (!run) return null;
    this._runs.delete(workflowId);
    this._bytes -= run.bytes;
    return run;
  }

  /**
   * Keep a suspended run as the most recently used, letting the least recently used go while
   * over either bound. False (and the run is evicted) when it cannot be kept at all.
   * @param {string} workflowId
   * @param {KeptRun} run
   * @returns {boolean}
   */
  keep(workflowId, run) {
    const previous = this.take(workflowId);
    if (previous && previous !== run) this._evict(workflowId, previous, 'replaced');
    if (!this.enabled || run.bytes > this.maxBytes) {
      this._evict(workflowId, run, this.enabled ? `its journal (${run.bytes} bytes) is over the cache's ${this.maxBytes}` : 'the cache is off');
      return false;
    }
    this._runs.set(workflowId, run);
    this._bytes += run.bytes;
    for (const [id, oldest] of this._runs) {
      if (this._runs.size <= this.maxRuns && this._bytes <= this.maxBytes) break;
      this.take(id);
      this._evict(id, oldest, 'least recently used');
    }
    return true;
  }

  /**
   * Let a run go: taken out of the cache if there, evicted.
   * @param {string} workflowId
   * @param {KeptRun} run
   * @param {string} why
   */
  drop(workflowId, run, why) {
    if (this._runs.get(workflowId) === run) this.take(workflowId);
    this._evict(workflowId, run, why);
  }

  /** Let every run go, and keep none from now on (the worker is stopping). */
  close() {
    this.maxRuns = 0;
    for (const [id, run] of [...this._runs]) this.drop(id, run, 'the worker is stopping');
  }

  /** A task resumed a kept run. */
  hit() {
    this.counts.hits += 1;
  }

  /**
   * A task had to replay its run from the start.
   * @param {string} workflowId
   * @param {string} [why] logged when given: why a kept run could not be resumed
   */
  miss(workflowId, why = '') {
    this.counts.misses += 1;
    if (why) this._log?.info(`workflow ${workflowId}: replayed from its journal (${why})`);
  }

  /**
   * @param {string} workflowId
   * @param {KeptRun} run
   * @param {string} why
   */
  _evict(workflowId, run, why) {
    this.counts.evictions += 1;
    run.ctx.evict();
    this._log?.info(`workflow ${workflowId}: let go from the worker's cache (${why})`);
  }
}

/**
 * A journal's size as kept in memory: what history says it is (history_bytes), else an
 * estimate from its events' payloads, added to `before`.
 * @param {any} loaded a LoadJournalResponse
 * @param {number} before the bytes of the events before these
 */
export function journalBytes(loaded, before = 0) {
  const reported = Number(loaded.history_bytes ?? 0);
  if (reported > 0) return reported;
  let bytes = before;
  for (const event of loaded.events ?? []) {
    bytes += 128 + (event.payload?.data?.length ?? 0) + (event.failure?.message?.length ?? 0) + (event.failure?.stack_trace?.length ?? 0);
  }
  return bytes;
}
