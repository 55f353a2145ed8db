// The lease keeper against a scripted RenewLeases: deadlines on the database clock, work
// aborted when a lease cannot be renewed in time or a renewal leaves it out, grants that
// arrive dead not held.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseFencedError, LeaseKeeper } from '../src/leases.js';
import { toTimestamp } from '../src/payload.js';

const TTL_MS = 600;
const INTERVAL_MS = 100;
const quiet = { warn() {} };

/** A RenewLeases that renews what `renews` allows, or fails while `down`. */
function scripted() {
  const scheduler = {
    down: false,
    renews: (/** @type {any} */ _lease) => true,
    async renew(request) {
      if (scheduler.down) throw new Error('UNAVAILABLE');
      const now = Date.now();
      const renewed = request.leases.filter((lease) => scheduler.renews(lease)).map((lease) => ({ lease, expire_time: toTimestamp(now + TTL_MS) }));
      return { renewed, now: toTimestamp(now) };
    },
  };
  return scheduler;
}

async function keeperOf(scheduler) {
  const keeper = new LeaseKeeper((request) => scheduler.renew(request), quiet);
  keeper.configure(TTL_MS, INTERVAL_MS);
  await sleep(20); // the first renewal reads the database clock
  return keeper;
}

const lease = (id) => ({ workflow_id: id, fence: 1, step_id: '' });

/** Resolves once `signal` is aborted (at once if it is already: a loaded machine may get there first). */
const aborted = (signal) => (signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', resolve)));

test('leases renewed in time keep their work running', async () => {
  const keeper = await keeperOf(scripted());
  const signal = keeper.hold(lease('w'), toTimestamp(Date.now() + TTL_MS));
  await sleep(TTL_MS * 2);
  assert.equal(signal.aborted, false);
  assert.deepEqual(keeper.refs().map((l) => l.workflow_id), ['w']);
  keeper.stop();
});

test('a lease that cannot be renewed is fenced before it expires', async () => {
  const scheduler = scripted();
  const keeper = await keeperOf(scheduler);
  const granted = Date.now();
  const signal = keeper.hold(lease('w'), toTimestamp(granted + TTL_MS));
  scheduler.down = true;
  await aborted(signal);
  assert.ok(Date.now() - granted < TTL_MS, 'stopped before the lease could expire');
  assert.ok(signal.reason instanceof LeaseFencedError);
  assert.deepEqual(keeper.refs(), []);
  keeper.stop();
});

test('a lease a renewal leaves out is fenced at once', async () => {
  const scheduler = scripted();
  const keeper = await keeperOf(scheduler);
  scheduler.renews = () => false;
  const began = Date.now();
  const signal = keeper.hold(lease('w'), toTimestamp(began + TTL_MS));
  await aborted(signal);
  assert.ok(Date.now() - began < TTL_MS / 2);
  keeper.stop();
});

test('a grant delivered past its deadline is not held', async () => {
  const keeper = await keeperOf(scripted());
  assert.equal(keeper.hold(lease('late'), toTimestamp(Date.now() + TTL_MS * 0.2)), null);
  assert.deepEqual(keeper.refs(), []);
  keeper.stop();
});

/** The scripted scheduler, counting its RenewLeases calls. */
function counted() {
  const scheduler = scripted();
  const renew = scheduler.renew;
  scheduler.calls = 0;
  scheduler.renew = async (request) => {
    scheduler.calls += 1;
    return renew(request);
  };
  return scheduler;
}

test('a grant read against the clock waits for the next renewal of them all', async (t) => {
  // Renewing every held lease at each grant cost the scheduler a statement per held lease per
  // grant; a grant with its expiry on a known clock has its true deadline already.
  const scheduler = counted();
  const keeper = new LeaseKeeper((request) => scheduler.renew(request), quiet);
  t.after(() => keeper.stop());
  keeper.configure(TTL_MS * 10, TTL_MS * 3); // renewals far apart
  await sleep(50); // the clock, read at once
  assert.equal(scheduler.calls, 1);
  const signal = keeper.hold(lease('w'), toTimestamp(Date.now() + TTL_MS * 10));
  await sleep(TTL_MS);
  assert.equal(scheduler.calls, 1);
  assert.equal(signal.aborted, false);
});

test('a grant held before any clock is renewed at once', async (t) => {
  const scheduler = counted();
  const keeper = new LeaseKeeper((request) => scheduler.renew(request), quiet);
  t.after(() => keeper.stop());
  keeper._clock = null; // as before the welcome's clock reading
  keeper._intervalMs = TTL_MS * 3; // renewals far apart, none scheduled yet
  keeper._ttlMs = TTL_MS * 10;
  keeper.hold(lease('w'), toTimestamp(Date.now() + TTL_MS * 10)); // its deadline is a guess
  await sleep(50);
  assert.equal(scheduler.calls, 1);
});

test('a renewal that fails is retried at once, not an interval later', async (t) => {
  // A lease lasts three intervals; an attempt that timed out has used one. Waiting another
  // before the next attempt let a lease expire after a single slow answer.
  const scheduler = counted();
  const keeper = new LeaseKeeper((request) => scheduler.renew(request), quiet);
  t.after(() => keeper.stop());
  keeper.configure(TTL_MS, TTL_MS / 3); // as a welcome says: a lease lasts three intervals
  await sleep(50); // the clock, read at once
  const signal = keeper.hold(lease('w'), toTimestamp(Date.now() + TTL_MS));
  scheduler.down = true;
  const calls = scheduler.calls;
  await keeper.renew(); // fails
  scheduler.down = false;
  await sleep(50);
  assert.equal(scheduler.calls, calls + 2, 'retried at once');
  assert.equal(signal.aborted, false);
});
