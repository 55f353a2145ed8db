// A step's output sent ahead of its answer (as the Python SDK's tests/unit/worker/
// test_outcomes_ahead.py): the code goes on at once, and the lease's next record answers for it
// (its refusal raised there, before the next step's body runs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execute } from '../src/runner.js';
import { JournalCallError } from '../src/errors.js';
import { FakeJournal, JournalBuilder, context } from './helpers.js';

/** Answers the output of step `held` only once released, then with `refusal` if given. */
class HeldOutput extends FakeJournal {
  constructor(held, { refusal = null, ...options } = {}) {
    super(options);
    this.held = held;
    this.refusal = refusal;
    this.holding = false; // the held output arrived
    this._release = null;
    this.released = new Promise((resolve) => {
      this._release = resolve;
    });
  }

  release() {
    this._release();
  }

  async call(method, request) {
    if (method === 'RecordStep' && request.output && request.step_id === this.held) {
      this.holding = true;
      await this.released;
      if (this.refusal) {
        this.calls.push([method, structuredClone(request)]);
        throw this.refusal;
      }
    }
    return super.call(method, request);
  }
}

/** Let every promise that can go on do so, and the fake's answers come (setImmediate). */
async function runOn(turns = 10) {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

test('the code goes on before the output is answered, and the next start goes beside it', async () => {
  const journal = new HeldOutput('a');
  const ran = [];
  const outcome = execute(async (c) => {
    await c.step('a', () => 1);
    ran.push('after a');
    await c.step('b', () => ran.push('b'));
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  await runOn();
  assert.equal(journal.holding, true);
  // b's start is sent beside a's output; its body waits for both answers.
  assert.deepEqual(journal.starts.map((s) => s.step_id), ['a', 'b']);
  assert.deepEqual(ran, ['after a']);
  journal.release();
  assert.equal((await outcome).kind, 'result');
  assert.deepEqual(ran, ['after a', 'b']);
  assert.deepEqual(journal.recorded('RecordStep').map((r) => r.step_id), ['a', 'b']);
});

test('a refused output stops the run before the next body', async () => {
  const journal = new HeldOutput('a', { refusal: new JournalCallError('FAILED_PRECONDITION', 'newer lease', 'STALE_FENCE') });
  const ran = [];
  const outcome = execute(async (c) => {
    await c.step('a', () => 1);
    await c.step('b', () => ran.push('b'));
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  await runOn();
  journal.release();
  assert.equal((await outcome).kind, 'lost');
  assert.deepEqual(ran, []);
});

test('a run whose code ends with an output on its way ends once it is answered, or is lost with it', async () => {
  const refused = new HeldOutput('a', { refusal: new JournalCallError('FAILED_PRECONDITION', 'newer lease', 'STALE_FENCE') });
  const outcome = execute(async (c) => c.step('a', () => 1), context(new JournalBuilder(), refused), null);
  let ended = false;
  outcome.then(() => (ended = true));
  await runOn();
  assert.equal(ended, false); // the code returned; its result stands only once a's output is in
  refused.release();
  assert.equal((await outcome).kind, 'lost');
});

test('a call other than a step waits for the output first', async () => {
  const journal = new HeldOutput('a');
  const outcome = execute(async (c) => {
    await c.step('a', () => 1);
    await c.setState('k', 1);
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  await runOn();
  assert.equal(journal.holding, true);
  assert.deepEqual(journal.recorded('SetState'), []);
  journal.release();
  assert.equal((await outcome).kind, 'result');
  assert.equal(journal.recorded('SetState').length, 1);
});

test('an output history could refuse is not sent ahead', async () => {
  const journal = new HeldOutput('a');
  let deep = [];
  for (let i = 0; i < 40; i++) deep = [deep];
  const ran = [];
  const outcome = execute(async (c) => {
    await c.step('a', () => deep);
    ran.push('after a');
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  await runOn();
  assert.equal(journal.holding, true);
  assert.deepEqual(ran, []); // its answer is awaited: a refusal would fail the step at once
  journal.release();
  assert.equal((await outcome).kind, 'result');
});

/** A run with a cancel request: a start sent beside an output, unless_cancel_requested, is
 * kept out of the journal, as history does (the other answers do not report it). */
class CancelRequested extends HeldOutput {
  async call(method, request) {
    if (method === 'RecordStep' && request.attempt_started && request.unless_cancel_requested) {
      this.starts.push(structuredClone(request));
      return { event_id: 0, retry_time: null, cancel_requested: true };
    }
    return super.call(method, request);
  }
}

test('a cancel request keeps the start beside an output, and so the next body, out', async () => {
  const journal = new CancelRequested('a');
  const ran = [];
  const outcome = execute(async (c) => {
    await c.step('a', () => 1);
    try {
      await c.step('b', () => ran.push('b'));
    } finally {
      // delivered once: the code's later steps run, their starts journaled as any
      await c.step('undo', () => ran.push('undo'));
    }
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  await runOn();
  journal.release();
  assert.equal((await outcome).kind, 'cancelled');
  assert.deepEqual(ran, ['undo']);
  const [aStart, bStart, undoStart] = journal.starts;
  assert.equal(Boolean(aStart.unless_cancel_requested), false);
  assert.equal(bStart.unless_cancel_requested, true);
  assert.equal(Boolean(undoStart.unless_cancel_requested), false);
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [
    ['RecordStep', 'a', 0],
    ['RecordCancellation', 'b', 1],
    ['RecordStep', 'undo', 2],
  ]);
});

test('a draining worker hands the run back before its next new call, once the output is answered', async () => {
  const journal = new HeldOutput('a');
  const ctx = context(new JournalBuilder(), journal);
  const stopping = new AbortController();
  ctx._stopping = stopping.signal;
  const ran = [];
  const outcome = execute(async (c) => {
    await c.step('a', () => {
      stopping.abort(); // the worker starts draining while step a runs: a finishes
      return 1;
    });
    await c.step('b', () => ran.push('b'));
    return 'done';
  }, ctx, null);
  let ended = false;
  outcome.then(() => (ended = true));
  await runOn();
  assert.equal(journal.holding, true);
  assert.equal(ended, false); // no lease goes back with an outcome on its way
  journal.release();
  assert.equal((await outcome).kind, 'handed_back');
  assert.deepEqual(ran, []);
  assert.deepEqual(journal.starts.map((s) => s.step_id), ['a']); // b was never begun
  assert.deepEqual(journal.recorded('RecordStep').map((r) => r.step_id), ['a']);
});
