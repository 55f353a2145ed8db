// Replay rules of WorkflowContext against hand-built journals and a fake journal client.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execute } from '../src/runner.js';
import { RetryPolicy } from '../src/retry.js';
import { StepFailedError, SignalTimeoutError, WorkflowCancelledError } from '../src/errors.js';
import { fromPayload, toPayload, toTimestamp } from '../src/payload.js';
import { WorkflowContext } from '../src/context.js';
import { FakeJournal, JournalBuilder, NOW, context, timestampMs } from './helpers.js';

test('step ids count per name; positions follow call order; results are recorded', async () => {
  const journal = new FakeJournal();
  const ctx = context(new JournalBuilder(), journal);
  const outcome = await execute(async (c) => {
    const a = await c.step('charge', () => ({ n: 1 }));
    const b = await c.step('ship', () => 'x');
    const d = await c.step('charge', (info) => [info.stepId, info.attempt, info.idempotencyKey]);
    return { a, b, d };
  }, ctx, null);
  assert.equal(outcome.kind, 'result');
  assert.deepEqual(fromPayload(outcome.value), { a: { n: 1 }, b: 'x', d: ['charge#2', 1, 'wf-1:charge#2'] });
  const steps = journal.recorded('RecordStep');
  assert.deepEqual(steps.map((r) => [r.step_id, r.step_name, r.position, r.attempt, r.fence, r.workflow_id]), [
    ['charge', 'charge', 0, 1, 7, 'wf-1'],
    ['ship', 'ship', 1, 1, 7, 'wf-1'],
    ['charge#2', 'charge', 2, 1, 7, 'wf-1'],
  ]);
});

test('replay returns recorded results and failures in order', async () => {
  const journal = new FakeJournal();
  const builder = new JournalBuilder()
    .completed(0, 'charge', { paid: 5 })
    .failed(1, 'charge#2', 'CardError', 'declined')
    .state(2, 'phase');
  let ran = 0;
  const outcome = await execute(async (c) => {
    const first = await c.step('charge', () => { ran++; });
    let error;
    try {
      await c.step('charge', () => { ran++; });
    } catch (e) {
      error = e;
    }
    await c.setState('phase', 'done');
    const third = await c.step('ship', () => 'new');
    return { first, errorType: error.errorType, isStepFailed: error instanceof StepFailedError, third };
  }, context(builder, journal), null);
  assert.equal(ran, 0);
  assert.deepEqual(fromPayload(outcome.value), { first: { paid: 5 }, errorType: 'CardError', isStepFailed: true, third: 'new' });
  assert.deepEqual(journal.methods(), ['RecordStep']);
  assert.equal(journal.recorded('RecordStep')[0].position, 3);
});

test('a recorded output held by reference is fetched when the code reaches it, and only then', async () => {
  const [a, b] = ['a'.repeat(64), 'b'.repeat(64)];
  const journal = new FakeJournal({ payloads: { [a]: toPayload('large a'), [b]: toPayload('large b') } });
  const builder = new JournalBuilder().completedByReference(0, 'first', a).completedByReference(1, 'second', b);
  let fetchedFirst;
  const outcome = await execute(async (c) => {
    const first = await c.step('first', () => 'ran');
    fetchedFirst = journal.recorded('LoadPayload').map((r) => Buffer.from(r.sha256).toString('hex'));
    return [first, await c.step('second', () => 'ran')];
  }, context(builder, journal), null);
  assert.deepEqual(fetchedFirst, [a]);
  assert.deepEqual(fromPayload(outcome.value), ['large a', 'large b']);
  assert.deepEqual(journal.recorded('LoadPayload').map((r) => [r.workflow_id, r.fence]), [['wf-1', 7], ['wf-1', 7]]);
});

test('a different step id at a position parks the run (non-determinism)', async () => {
  const builder = new JournalBuilder().completed(0, 'reserve', 1);
  const outcome = await execute(async (c) => {
    try {
      await c.step('charge', () => 2);
    } catch {
      return 'swallowed'; // user code cannot catch non-determinism
    }
    return 'done';
  }, context(builder), null);
  assert.equal(outcome.kind, 'park');
  assert.equal(outcome.value.type, 'NonDeterminismError');
  assert.match(outcome.value.message, /'charge'.*'reserve'/);
});

test('returning with recorded calls left over parks the run', async () => {
  const builder = new JournalBuilder().completed(0, 'a', 1).completed(1, 'b', 2);
  const outcome = await execute(async (c) => c.step('a', () => 0), context(builder), null);
  assert.equal(outcome.kind, 'park');
  assert.match(outcome.value.message, /recorded step\(s\) b/);
});

test('a step finding a timer at its position is non-deterministic', async () => {
  const builder = new JournalBuilder().timer(0, '$sleep', NOW - 1000);
  const outcome = await execute(async (c) => c.step('$sleep'.slice(1), () => 0), context(builder), null);
  assert.equal(outcome.kind, 'park');
});

test('a failed attempt with retries left is recorded with retry_delay, then the run suspends', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => c.step('flaky', () => { throw new Error('boom'); }), context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'suspend');
  const [request] = journal.recorded('RecordStep');
  assert.equal(request.failure.type, 'Error');
  assert.equal(request.failure.message, 'boom');
  assert.deepEqual(request.retry_delay, { seconds: 1, nanos: 0 });
  assert.equal(request.output, undefined);
  assert.equal(outcome.wait.kind, 'WAIT_KIND_RETRY');
  assert.equal(outcome.wait.name, 'flaky');
  assert.equal(timestampMs(outcome.wait.until), NOW + 1000);
});

test('the retry runs attempt n+1 once due, and waits again when woken early', async () => {
  const due = new JournalBuilder().attemptFailed('flaky', 1, NOW - 10).attemptFailed('flaky', 2, NOW - 5);
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => c.step('flaky', (info) => info.attempt), context(due, journal), null);
  assert.deepEqual(fromPayload(outcome.value), 3);
  assert.equal(journal.recorded('RecordStep')[0].attempt, 3);

  const early = new JournalBuilder().attemptFailed('flaky', 1, NOW + 5000);
  const journal2 = new FakeJournal();
  const waiting = await execute(async (c) => c.step('flaky', () => 'ran'), context(early, journal2), null);
  assert.equal(waiting.kind, 'suspend');
  assert.equal(waiting.wait.kind, 'WAIT_KIND_RETRY');
  assert.equal(timestampMs(waiting.wait.until), NOW + 5000);
  assert.deepEqual(journal2.calls, []);
});

test('a final failure is recorded without retry_delay and thrown into the code', async () => {
  const journal = new FakeJournal();
  const retry = new RetryPolicy({ maximumAttempts: 2 });
  const builder = new JournalBuilder().attemptFailed('pay', 1, NOW - 1);
  const outcome = await execute(async (c) => {
    try {
      await c.step('pay', () => { const e = new Error('no'); e.name = 'PayError'; throw e; });
    } catch (error) {
      return { caught: error.name, type: error.errorType, step: error.stepId };
    }
    return null;
  }, context(builder, journal, retry), null);
  assert.deepEqual(fromPayload(outcome.value), { caught: 'StepFailedError', type: 'PayError', step: 'pay' });
  const [request] = journal.recorded('RecordStep');
  assert.equal(request.attempt, 2);
  assert.equal(request.retry_delay, undefined);
});

test('non-retryable error names fail at once; a non-JSON result fails without retry', async () => {
  const journal = new FakeJournal();
  const retry = new RetryPolicy({ nonRetryableErrorTypes: ['TypeError'] });
  const outcome = await execute(async (c) => {
    const errors = [];
    try { await c.step('a', () => { throw new TypeError('bad'); }); } catch (e) { errors.push(e.errorType); }
    try { await c.step('b', () => NaN); } catch (e) { errors.push(e.errorType); }
    return errors;
  }, context(new JournalBuilder(), journal, retry), null);
  assert.deepEqual(fromPayload(outcome.value), ['TypeError', 'TypeError']);
  assert.ok(journal.recorded('RecordStep').every((r) => r.retry_delay === undefined && r.failure));
});

test('a step attempt over its timeout is a failed attempt', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(
    async (c) => c.step('slow', () => new Promise((resolve) => setTimeout(resolve, 1000)), { timeout: 0.05 }),
    context(new JournalBuilder(), journal),
    null,
  );
  assert.equal(outcome.kind, 'suspend');
  assert.equal(journal.recorded('RecordStep')[0].failure.type, 'StepTimeoutError');
});

test('sleep starts a timer and suspends until it fires; a fired timer goes on', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => { await c.sleep(30); return 'late'; }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'suspend');
  assert.equal(outcome.wait.kind, 'WAIT_KIND_TIMER');
  assert.equal(outcome.wait.name, '$sleep');
  assert.equal(timestampMs(outcome.wait.until), NOW + 30_000);
  const [, start] = journal.calls[0];
  assert.deepEqual([start.step_id, start.position, start.delay], ['$sleep', 0, { seconds: 30, nanos: 0 }]);

  const fired = new JournalBuilder().timer(0, '$sleep', NOW - 1);
  const journal2 = new FakeJournal();
  const done = await execute(async (c) => { await c.sleep(30); await c.sleep(0); return 'awake'; }, context(fired, journal2), null);
  assert.deepEqual(fromPayload(done.value), 'awake');
  assert.deepEqual(journal2.recorded('StartTimer').map((r) => [r.step_id, r.position]), [['$sleep#2', 1]]);
});

test('sleepUntil starts a $sleep timer at the moment given and suspends until then; replay waits for the recorded time', async () => {
  const journal = new FakeJournal();
  const moment = new Date(NOW + 3_600_000);
  const outcome = await execute(async (c) => { await c.sleepUntil(moment); return 'later'; }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'suspend');
  assert.deepEqual([outcome.wait.kind, outcome.wait.name], ['WAIT_KIND_TIMER', '$sleep']);
  assert.equal(timestampMs(outcome.wait.until), moment.getTime());
  const [start] = journal.recorded('StartTimer');
  assert.deepEqual([start.step_id, start.position, timestampMs(start.fire_time), start.delay], ['$sleep', 0, moment.getTime(), undefined]);

  // The recorded due time rules on replay, even if the code now asks for another moment.
  const fired = new JournalBuilder().timer(0, '$sleep', NOW - 1);
  const done = await execute(async (c) => { await c.sleepUntil(new Date(NOW + 60_000)); return 'awake'; }, context(fired), null);
  assert.equal(fromPayload(done.value), 'awake');
  assert.throws(() => context(new JournalBuilder()).sleepUntil(/** @type {any} */ ('tomorrow')), TypeError);
});

test('a timer due within 250 ms is waited out locally', async () => {
  const builder = new JournalBuilder().timer(0, '$sleep', NOW + 100);
  const started = performance.now();
  const outcome = await execute(async (c) => { await c.sleep(5); return 'ok'; }, context(builder), null);
  assert.equal(outcome.kind, 'result');
  assert.ok(performance.now() - started >= 95);
});

test('a timer due soon is waited out on the clock read at the end of the load', async () => {
  // The load's `now` decides what is due at load; the wait counts from `clock`, read after the
  // events: a load that took 200 ms does not make the wait 200 ms late.
  const builder = new JournalBuilder().timer(0, '$sleep', NOW + 200);
  const loaded = { ...builder.loaded(), clock: toTimestamp(NOW + 200) };
  const started = performance.now();
  const outcome = await execute(async (c) => { await c.sleep(5); return 'ok'; }, new WorkflowContext(loaded, new FakeJournal(), { fence: 7, retry: new RetryPolicy() }), null);
  assert.equal(outcome.kind, 'result');
  assert.ok(performance.now() - started < 150, 'due by the clock already: no wait');
});

test('signals: the oldest pending one is consumed; none suspends on the signal name', async () => {
  const builder = new JournalBuilder().signal('approve', { by: 'ann' }).signal('approve', { by: 'bob' });
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => [await c.waitForSignal('approve'), await c.waitForSignal('approve'), await c.waitForSignal('approve')], context(builder, journal), null);
  assert.equal(outcome.kind, 'suspend');
  assert.deepEqual(outcome.wait, { kind: 'WAIT_KIND_SIGNAL', name: 'approve', until: null });
  const consumed = journal.recorded('ConsumeSignals');
  assert.deepEqual(consumed.map((r) => [r.step_id, r.position, r.event_ids, fromPayload(r.result)]), [
    ['$signal:approve', 0, [2], { by: 'ann' }],
    ['$signal:approve#2', 1, [3], { by: 'bob' }],
  ]);
});

test('a signal wait with a timeout starts $timeout:<name>, and times out once due', async () => {
  const journal = new FakeJournal();
  const waiting = await execute(async (c) => c.waitForSignal('go', { timeout: 60 }), context(new JournalBuilder(), journal), null);
  assert.equal(waiting.wait.kind, 'WAIT_KIND_SIGNAL');
  assert.equal(timestampMs(waiting.wait.until), NOW + 60_000);
  assert.equal(journal.recorded('StartTimer')[0].step_id, '$timeout:go');

  const due = new JournalBuilder().timer(0, '$timeout:go', NOW - 1);
  const journal2 = new FakeJournal();
  const outcome = await execute(async (c) => {
    try { await c.waitForSignal('go', { timeout: 60 }); } catch (e) { return e instanceof SignalTimeoutError; }
    return false;
  }, context(due, journal2), null);
  assert.equal(fromPayload(outcome.value), true);
  assert.deepEqual(journal2.recorded('ConsumeSignals').map((r) => [r.step_id, r.position, r.timed_out]), [['$signal:go', 1, true]]);
});

test('a requested cancellation is delivered at the next new call, once', async () => {
  const builder = new JournalBuilder().completed(0, 'reserve', 1).cancelRequested('customer left');
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => {
    await c.step('reserve', () => 1);
    try {
      await c.step('charge', () => 'charged');
    } catch (error) {
      assert.ok(error instanceof WorkflowCancelledError);
      assert.match(error.message, /customer left/);
      await c.step('release', () => 'released'); // compensation runs normally
      throw error;
    }
    return 'not cancelled';
  }, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.methods(), ['RecordCancellation', 'RecordStep']);
  assert.deepEqual(journal.recorded('RecordCancellation')[0], { step_id: 'charge', step_name: 'charge', position: 1, workflow_id: 'wf-1', fence: 7 });
  assert.equal(journal.recorded('RecordStep')[0].step_id, 'release');
});

test('a cancellation while a timer has not fired is delivered at "$sleep:cancelled" and replayed there', async () => {
  const builder = new JournalBuilder().timer(0, '$sleep', NOW + 60_000).cancelRequested();
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => { await c.sleep(60); return 'slept'; }, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.recorded('RecordCancellation').map((r) => [r.step_id, r.position]), [['$sleep:cancelled', 1]]);

  const replay = new JournalBuilder().timer(0, '$sleep', NOW + 60_000).cancelRequested().cancellationDelivered(1, '$sleep:cancelled');
  const journal2 = new FakeJournal();
  const again = await execute(async (c) => { await c.sleep(60); return 'slept'; }, context(replay, journal2), null);
  assert.equal(again.kind, 'cancelled');
  assert.deepEqual(journal2.calls, []);
});

test('ctx.call schedules a remote step and suspends with WAIT_KIND_STEP', async () => {
  const journal = new FakeJournal();
  const retry = new RetryPolicy({ maximumAttempts: 3 });
  const outcome = await execute(async (c) => {
    await c.step('charge', () => 1); // a local step of the same name shares the numbering
    return c.call('charge', { amount: 5 }, { taskQueue: 'payments', timeout: 30, retry });
  }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'suspend');
  assert.deepEqual(outcome.wait, { kind: 'WAIT_KIND_STEP', name: 'charge#2', until: null });
  const [request] = journal.recorded('ScheduleStep');
  assert.equal(request.step_id, 'charge#2');
  assert.equal(request.step_name, 'charge');
  assert.equal(request.position, 1);
  assert.equal(request.task_queue, 'payments');
  assert.deepEqual(fromPayload(request.input), { amount: 5 });
  assert.deepEqual(request.timeout, { seconds: 30, nanos: 0 });
  assert.equal(request.retry.maximum_attempts, 3);
  assert.deepEqual(request.retry.initial_interval, { seconds: 1, nanos: 0 });
});

test('ctx.call defaults to the workflow queue and policy', async () => {
  const journal = new FakeJournal();
  await execute(async (c) => c.call('notify', null), context(new JournalBuilder(), journal), null);
  const [request] = journal.recorded('ScheduleStep');
  assert.equal(request.task_queue, 'q');
  assert.equal(request.retry.maximum_attempts, 5);
  assert.equal(request.timeout, undefined);
});

test('gather schedules every call before suspending, on the first pending step id', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(
    async (c) => c.gather([c.call('square', { n: 1 }), c.call('square', { n: 2 }), c.call('cube', { n: 3 })]),
    context(new JournalBuilder(), journal),
    null,
  );
  assert.equal(outcome.kind, 'suspend');
  assert.deepEqual(outcome.wait, { kind: 'WAIT_KIND_STEP', name: 'square', until: null });
  assert.deepEqual(journal.recorded('ScheduleStep').map((r) => [r.step_id, r.position, fromPayload(r.input)]), [
    ['square', 0, { n: 1 }],
    ['square#2', 1, { n: 2 }],
    ['cube', 2, { n: 3 }],
  ]);
});

test('replayed remote steps: outcomes found by step id (no position); pending ones keep the run waiting', async () => {
  const builder = new JournalBuilder()
    .scheduled(0, 'square', { n: 1 })
    .scheduled(1, 'square#2', { n: 2 })
    .remoteCompleted('square#2', 4);
  const journal = new FakeJournal();
  const waiting = await execute(async (c) => c.gather([c.call('square', { n: 1 }), c.call('square', { n: 2 })]), context(builder, journal), null);
  assert.deepEqual(waiting.wait, { kind: 'WAIT_KIND_STEP', name: 'square', until: null });
  assert.deepEqual(journal.calls, []);

  builder.remoteCompleted('square', 1);
  const done = await execute(async (c) => {
    const results = await c.gather([c.call('square', { n: 1 }), c.call('square', { n: 2 })]);
    return { results, after: await c.step('sum', () => results[0] + results[1]) };
  }, context(builder, journal), null);
  assert.deepEqual(fromPayload(done.value), { results: [1, 4], after: 5 });
  assert.deepEqual(journal.recorded('RecordStep').map((r) => [r.step_id, r.position]), [['sum', 2]]);
});

test('gather settles all calls, then throws the first failure in call order', async () => {
  const builder = new JournalBuilder()
    .scheduled(0, 'a', null)
    .scheduled(1, 'b', null)
    .scheduled(2, 'c', null)
    .remoteFailed('c', 'CError', 'c broke')
    .remoteCompleted('a', 'A')
    .remoteFailed('b', 'BError', 'b broke');
  const outcome = await execute(async (c) => {
    try {
      await c.gather([c.call('a'), c.call('b'), c.call('c')]);
    } catch (error) {
      return [error.stepId, error.errorType];
    }
    return null;
  }, context(builder), null);
  assert.deepEqual(fromPayload(outcome.value), ['b', 'BError']);
});

test('Promise.all over ctx.call works too', async () => {
  const builder = new JournalBuilder().scheduled(0, 'a', 1).scheduled(1, 'b', 2).remoteCompleted('b', 20).remoteCompleted('a', 10);
  const outcome = await execute(async (c) => Promise.all([c.call('a', 1), c.call('b', 2)]), context(builder), null);
  assert.deepEqual(fromPayload(outcome.value), [10, 20]);
});

test('a remote call finding a local step at its position is non-deterministic', async () => {
  const builder = new JournalBuilder().completed(0, 'charge', 1);
  const outcome = await execute(async (c) => c.call('charge', {}), context(builder), null);
  assert.equal(outcome.kind, 'park');
});

test('a cancellation while remote steps are pending is delivered at "<first step id>:cancelled"', async () => {
  const builder = new JournalBuilder().scheduled(0, 'a', null).scheduled(1, 'b', null).cancelRequested();
  const journal = new FakeJournal();
  const body = async (c) => {
    try {
      await c.gather([c.call('a'), c.call('b')]);
    } catch (error) {
      if (!(error instanceof WorkflowCancelledError)) throw error;
      await c.step('refund', () => 'refunded');
      throw error;
    }
    return 'done';
  };
  const outcome = await execute(body, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [
    ['RecordCancellation', 'a:cancelled', 2],
    ['RecordStep', 'refund', 3],
  ]);
  // replay: delivered there again, whatever the flags
  builder.cancellationDelivered(2, 'a:cancelled').completed(3, 'refund', 'refunded');
  const journal2 = new FakeJournal();
  const again = await execute(body, context(builder, journal2), null);
  assert.equal(again.kind, 'cancelled');
  assert.deepEqual(journal2.calls, []);
});

test('a cancel request reported by an answer is delivered at the next call', async () => {
  const journal = new FakeJournal({ cancelAfter: 1 });
  const outcome = await execute(async (c) => {
    await c.step('a', () => 1);
    await c.step('b', () => 2);
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id]), [['RecordStep', 'a'], ['RecordCancellation', 'b']]);
});

test('a stale fence stops the run without letting the code see it', async () => {
  const { JournalCallError } = await import('../src/errors.js');
  const journal = new FakeJournal({ errors: { RecordStep: new JournalCallError('FAILED_PRECONDITION', 'newer lease', 'STALE_FENCE') } });
  const outcome = await execute(async (c) => {
    try { await c.step('a', () => 1); } catch { return 'caught'; }
    return 'done';
  }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'lost');
});

test('now() and uuid4() are recorded once as $now and $uuid', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => {
    const now = await c.now();
    const id = await c.uuid4();
    return { isDate: now instanceof Date, id };
  }, context(new JournalBuilder(), journal), null);
  assert.equal(fromPayload(outcome.value).isDate, true);
  assert.deepEqual(journal.recorded('RecordStep').map((r) => [r.step_id, r.position]), [['$now', 0], ['$uuid', 1]]);
  const builder = new JournalBuilder().completed(0, '$now', '2020-01-01T00:00:00.000Z');
  const replay = await execute(async (c) => (await c.now()).toISOString(), context(builder), null);
  assert.equal(fromPayload(replay.value), '2020-01-01T00:00:00.000Z');
});

test('names starting with $ are refused', () => {
  const ctx = context(new JournalBuilder());
  assert.throws(() => ctx.step('$x', () => 1), TypeError);
  assert.throws(() => ctx.call('', 1), TypeError);
  assert.throws(() => ctx.waitForSignal('$s'), TypeError);
});

test('gather interrupts at its first call even when that one has its outcome (as Python)', async () => {
  const builder = new JournalBuilder().scheduled(0, 'a', null).scheduled(1, 'b', null).remoteCompleted('a', 1).cancelRequested();
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => c.gather([c.call('a'), c.call('b')]), context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [['RecordCancellation', 'a:cancelled', 2]]);
});

test('a single awaited remote call pending under a cancel request is interrupted at "<id>:cancelled"', async () => {
  const builder = new JournalBuilder().completed(0, 'reserve', 1).scheduled(1, 'charge', null).cancelRequested();
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => {
    await c.step('reserve', () => 1);
    return c.call('charge', {});
  }, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [['RecordCancellation', 'charge:cancelled', 2]]);
});

test('all outcomes in and no cancellation pending: no interrupt, the next call delivers', async () => {
  const builder = new JournalBuilder().scheduled(0, 'a', null).remoteCompleted('a', 'A').cancelRequested();
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => {
    const [a] = await c.gather([c.call('a')]);
    await c.step('next', () => a);
    return a;
  }, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [['RecordCancellation', 'next', 1]]);
});

test('a cancellation delivered while a remote call waited is thrown again even once its outcome came', async () => {
  const builder = new JournalBuilder()
    .scheduled(0, 'charge', null)
    .cancelRequested()
    .cancellationDelivered(1, 'charge:cancelled')
    .remoteCompleted('charge', 'late result');
  const journal = new FakeJournal();
  const body = async (c) => {
    try {
      return await c.call('charge', null);
    } catch (error) {
      if (!(error instanceof WorkflowCancelledError)) throw error;
      await c.step('undo', () => 'undone');
      throw error;
    }
  };
  const outcome = await execute(body, context(builder, journal), null);
  assert.equal(outcome.kind, 'cancelled');
  assert.deepEqual(journal.calls.map(([m, r]) => [m, r.step_id, r.position]), [['RecordStep', 'undo', 2]]);
  // the same in a gather
  const journal2 = new FakeJournal();
  const gathered = await execute(async (c) => c.gather([c.call('charge', null)]), context(builder, journal2), null);
  assert.equal(gathered.kind, 'cancelled');
});

test('an attempt is journaled as started before its body runs (not the SDK own calls)', async () => {
  const journal = new FakeJournal();
  const seen = [];
  const outcome = await execute(async (c) => {
    await c.now();
    return c.step('charge', () => {
      seen.push(journal.starts.length);
      return 1;
    });
  }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'result');
  assert.deepEqual(seen, [1]);
  assert.deepEqual(journal.starts.map((r) => [r.step_id, r.position, r.attempt, r.attempt_started, r.output]), [
    ['charge', 1, 1, true, undefined],
  ]);
});

test('an attempt started and never recorded fails as WorkerLostError without running, under the retry policy', async () => {
  let ran = 0;
  const lost = new JournalBuilder().attemptFailed('pay', 1, NOW - 10).attemptStarted('pay', 1).attemptStarted('pay', 2);
  const journal = new FakeJournal();
  const outcome = await execute(async (c) => c.step('pay', () => { ran++; }), context(lost, journal), null);
  assert.equal(ran, 0);
  assert.equal(outcome.kind, 'suspend');
  assert.equal(outcome.wait.kind, 'WAIT_KIND_RETRY');
  const [request] = journal.recorded('RecordStep');
  assert.equal(request.attempt, 2);
  assert.equal(request.failure.type, 'WorkerLostError');
  assert.match(request.failure.message, /attempt 2 of step 'pay' never reported: the worker running it was lost/);
  assert.deepEqual(request.retry_delay, { seconds: 2, nanos: 0 });
  assert.deepEqual(journal.starts, []);

  // Attempts used up: the step fails in the code.
  const last = new JournalBuilder().attemptStarted('pay', 1);
  const journal2 = new FakeJournal();
  const failed = await execute(async (c) => {
    try {
      await c.step('pay', () => { ran++; }, { retry: new RetryPolicy({ maximumAttempts: 1 }) });
    } catch (error) {
      return error.errorType;
    }
    return null;
  }, context(last, journal2), null);
  assert.equal(ran, 0);
  assert.equal(fromPayload(failed.value), 'WorkerLostError');
  assert.equal(journal2.recorded('RecordStep')[0].retry_delay, undefined);
});

test('a step that stops heartbeating fails as StepHeartbeatTimeoutError and its signal is aborted', async () => {
  const journal = new FakeJournal();
  let aborted = null;
  const outcome = await execute(async (c) => c.step('poll', async (info) => {
    info.heartbeat(1);
    await new Promise((resolve) => setTimeout(resolve, 30));
    info.heartbeat(2); // within the limit: the attempt goes on
    await new Promise((resolve) => {
      info.signal.addEventListener('abort', () => {
        aborted = info.signal.reason.name;
        resolve();
      });
    });
    return 'late';
  }, { heartbeatTimeout: 0.05 }), context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'suspend');
  assert.equal(aborted, 'StepHeartbeatTimeoutError');
  const [request] = journal.recorded('RecordStep');
  assert.equal(request.failure.type, 'StepHeartbeatTimeoutError');
  assert.throws(() => context(new JournalBuilder()).step('x', () => 1, { heartbeatTimeout: 0 }), RangeError);
});
