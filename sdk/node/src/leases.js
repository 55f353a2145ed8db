// The worker's leases: held, renewed with TaskService.RenewLeases, fenced at their deadline.
//
// One executor per lease: the scheduler grants a lease again once it expires, whatever this
// worker still runs, so the worker stops a lease's work before the lease can expire. Each
// renewal answers with the database clock's now and each lease's expiry on that clock; the
// database read `now` no earlier than the request was sent, so a lease expiring at E lasts at
// least until `sent + (E - now)` here; less MARGIN_FRACTION of the TTL, that is this worker's
// deadline for it. A grant carries its expiry too, read against the last renewal's clock (a
// grant delivered late is not started), and a lease a renewal leaves out is fenced at once.
// A lease whose deadline passes without a renewal (the scheduler or the link to it is down) is
// dropped and its work aborted: the task's AbortSignal fires, which halts the workflow code at
// its next durable call and aborts the signal every step body gets. JavaScript cannot stop a
// body: one that ignores its signal runs on, and its result is dropped.
//
// Node.js runs timers on its one event loop: renewals and deadlines wait while a step blocks
// the loop (a long synchronous computation). A block longer than the margin can let the lease
// expire: the worker fences it when the loop next runs its timers, and a journal write sent
// before that is refused by history if another worker has loaded the run since. Keep CPU-bound
// work out of the loop (worker_threads, a child process).

import { performance } from 'node:perf_hooks';
import { timestampMs } from './payload.js';
import { PerdureError } from './errors.js';

/** How much of the TTL the worker keeps in hand: work stops this long before expiry. */
export const MARGIN_FRACTION = 0.25;
/** The second retry of a failed renewal waits this much of the interval; each later one twice as long, up to the interval. */
export const RETRY_FRACTION = 1 / 16;

/**
 * How long to wait before retrying after `failures` failed renewals in a row. Not a whole
 * interval: a lease lasts three, and an attempt that timed out has used one already, so waiting
 * another would let it expire after a single slow answer. The first retry goes at once (the
 * channel may pick another scheduler replica), later ones back off towards the interval.
 */
export function retryDelayMs(intervalMs, failures) {
  if (failures <= 1) return 0;
  return Math.min(intervalMs, intervalMs * RETRY_FRACTION * 2 ** (failures - 2));
}

/** Why a lease's work was stopped (the AbortSignal's reason). */
export class LeaseFencedError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'LeaseFencedError';
  }
}

/** A task as logs name it. */
export function taskName(lease) {
  return lease.step_id ? `step ${lease.step_id} of ${lease.workflow_id}` : `workflow ${lease.workflow_id}`;
}

function leaseKey(lease) {
  return `${lease.workflow_id}\u0000${lease.step_id ?? ''}`;
}

export class LeaseKeeper {
  /**
   * @param {(request: any, timeoutMs: number) => Promise<any>} renew calls TaskService.RenewLeases
   * @param {{warn: Function, info?: Function}} log
   */
  constructor(renew, log) {
    this._renew = renew;
    this._log = log;
    /** @type {Map<string, {lease: any, controller: AbortController, timer: any}>} */
    this._held = new Map();
    this._ttlMs = 0;
    this._intervalMs = 0;
    this._renewTimer = null;
    this._retryTimer = null;
    this._renewing = false;
    this._failures = 0; // failed renewals in a row
    /** @type {{sent: number, now: number} | null} a renewal's send time (performance.now) and the database clock in its answer (ms) */
    this._clock = null;
  }

  /** Take the TTL and the renewal interval from a welcome; renew on that interval. */
  configure(ttlMs, intervalMs) {
    this._ttlMs = ttlMs;
    if (intervalMs === this._intervalMs && this._renewTimer) return;
    this._intervalMs = intervalMs;
    clearInterval(this._renewTimer);
    this._renewTimer = setInterval(() => this.renew(), intervalMs);
    setImmediate(() => this.renew()); // read the database clock
  }

  /**
   * Hold a fresh grant (`expireTime`: its expiry on the database clock). Read against the
   * clock, it has its true deadline and waits for the next renewal of them all; held on a guess
   * (no clock yet), it is renewed at once. Returns the signal that aborts when the lease is
   * fenced, or null when the grant arrived past its deadline (then nothing is held).
   */
  hold(lease, expireTime) {
    const exact = Boolean(this._clock && expireTime);
    const deadline = exact ? this._deadline(expireTime) : performance.now() + this._ttlMs * (1 - MARGIN_FRACTION);
    if (deadline <= performance.now()) return null;
    const controller = new AbortController();
    const held = { lease, controller, timer: null };
    this._held.set(leaseKey(lease), held);
    this._arm(held, deadline);
    if (!exact) setImmediate(() => this.renew());
    return controller.signal;
  }

  /** The local deadline (performance.now) of a lease expiring at `expireTime` (database clock). */
  _deadline(expireTime) {
    return this._clock.sent + (timestampMs(expireTime) - this._clock.now) - this._ttlMs * MARGIN_FRACTION;
  }

  /** Stop holding a lease (if its fence matches): the worker is done with it. */
  forget(lease) {
    const held = this._held.get(leaseKey(lease));
    if (held?.lease.fence !== Number(lease.fence)) return;
    clearTimeout(held.timer);
    this._held.delete(leaseKey(lease));
  }

  /** The leases held now. */
  refs() {
    return [...this._held.values()].map((held) => held.lease);
  }

  /** The scheduler says a lease is not this worker's: stop its work now. */
  revoke(lease, reason) {
    const held = this._held.get(leaseKey(lease));
    if (held?.lease.fence !== Number(lease.fence)) return;
    this._fence(held, `the scheduler revoked it: ${reason}`);
  }

  /** Stop renewing; leases left are no longer watched. */
  stop() {
    clearInterval(this._renewTimer);
    clearTimeout(this._retryTimer);
    this._renewTimer = null;
    for (const held of this._held.values()) clearTimeout(held.timer);
  }

  /** Renew every lease held (one call at a time); after a failure, retry soon (retryDelayMs). */
  async renew() {
    if (this._renewing || !this._intervalMs || (!this._held.size && this._clock)) return;
    this._renewing = true;
    clearTimeout(this._retryTimer);
    const sent = performance.now();
    const leases = this.refs();
    try {
      const response = await this._renew({ leases }, this._intervalMs);
      if (this._failures) this._log.info?.(`leases renewed again, after ${this._failures} failed attempt(s)`);
      this._failures = 0;
      this._clock = { sent, now: timestampMs(response.now) };
      const renewed = new Map((response.renewed ?? []).map((r) => [`${leaseKey(r.lease)}\u0000${Number(r.lease.fence)}`, r]));
      for (const lease of leases) {
        const held = this._held.get(leaseKey(lease));
        if (held?.lease.fence !== lease.fence) continue; // done with meanwhile
        const answer = renewed.get(`${leaseKey(lease)}\u0000${lease.fence}`);
        if (answer) this._arm(held, this._deadline(answer.expire_time));
        else this._fence(held, 'the scheduler no longer holds it for this worker');
      }
    } catch (error) {
      if (!this._failures) {
        this._log.warn(`cannot renew ${leases.length} lease(s) (${error?.message ?? error}); retrying, and their work stops at its deadline unless a renewal gets through`);
      }
      this._failures += 1;
    } finally {
      this._renewing = false;
    }
    if (this._failures && this._renewTimer) {
      this._retryTimer = setTimeout(() => this.renew(), retryDelayMs(this._intervalMs, this._failures));
    }
  }

  _arm(held, deadline) {
    clearTimeout(held.timer);
    held.timer = setTimeout(() => this._fence(held, 'it could not be renewed before its deadline'), Math.max(0, deadline - performance.now()));
  }

  _fence(held, why) {
    clearTimeout(held.timer);
    this._held.delete(leaseKey(held.lease));
    this._log.warn(
      `${taskName(held.lease)} (fence ${held.lease.fence}): stopping its work (${why}), before another worker can be granted it; a step body that ignores its AbortSignal runs on, its result dropped`,
    );
    held.controller.abort(new LeaseFencedError(`the lease of ${taskName(held.lease)} (fence ${held.lease.fence}) was fenced: ${why}`));
  }
}
