// Flow control in the Node.js SDK (worker-protocol.md §27): a remote call's keys and estimate
// go in its ScheduleStep, checked before anything is journaled; a step task's TaskDone
// carries what its handler reported, nothing when it reported nothing, zero when nothing ran;
// a task that came with budget_exceeded records a final BudgetExceeded failure without
// running, which the workflow gets as BudgetExceededError.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execute, runStepTask } from '../src/runner.js';
import { BudgetExceededError, JournalCallError, LeaseLostError, StepFailedError } from '../src/errors.js';
import { Worker, usageFromModelResponse } from '../src/index.js';
import { RetryPolicy } from '../src/retry.js';
import { fromPayload, toPayload } from '../src/payload.js';
import { UsageReport } from '../src/usage.js';
import { FakeCluster } from './fake-cluster.js';
import { FakeJournal, JournalBuilder, context } from './helpers.js';

const log = { info() {}, warn() {}, error() {} };

test('ctx.call sends its keys and estimate in ScheduleStep.flow; BigInts stay exact', async () => {
  const journal = new FakeJournal();
  const outcome = await execute(
    async (c) => c.call('chat', { q: 1 }, { keys: ['provider:openai', 'model:gpt'], estimate: { units: 2000, costMicros: 2n ** 62n } }),
    context(new JournalBuilder(), journal),
    null,
  );
  assert.equal(outcome.kind, 'suspend');
  const [request] = journal.recorded('ScheduleStep');
  assert.deepEqual(request.flow, { keys: ['provider:openai', 'model:gpt'], estimate: { units: 2000, cost_micros: '4611686018427387904' } });
});

test('gather: each call carries its own flow, and a plain call none', async () => {
  const journal = new FakeJournal();
  await execute(
    async (c) => c.gather([c.call('chat', 1, { keys: ['provider:openai'] }), c.call('chat', 2, { estimate: { units: 5 } }), c.call('chat', 3)]),
    context(new JournalBuilder(), journal),
    null,
  );
  const [first, second, third] = journal.recorded('ScheduleStep');
  assert.deepEqual(first.flow, { keys: ['provider:openai'], estimate: null });
  assert.deepEqual(second.flow, { keys: [], estimate: { units: 5, cost_micros: 0 } });
  assert.equal(third.flow, undefined);
});

/**
 * An assert.throws validator: an error of `ErrorClass` whose message matches `words`.
 * @param {Function} ErrorClass
 * @param {RegExp} words
 * @returns {(error: any) => boolean}
 */
function checks(ErrorClass, words) {
  return (error) => words.test(error?.message) && error instanceof ErrorClass;
}

test('bad keys or estimates throw at the call, before anything is journaled', async () => {
  /** @type {Array<[any, Function, RegExp]>} */
  const cases = [
    [{ keys: Array.from({ length: 9 }, (_, n) => `k${n}`) }, RangeError, /at most 8 keys/],
    [{ keys: [''] }, RangeError, /must not be empty/],
    [{ keys: ['x'.repeat(201)] }, RangeError, /at most 200 printable/],
    [{ keys: ['tab\there'] }, RangeError, /printable/],
    [{ keys: ['a', 'a'] }, RangeError, /must not repeat/],
    [{ keys: 'provider:openai' }, TypeError, /array of strings/],
    [{ keys: [1] }, TypeError, /must be a string/],
    [{ estimate: { units: 2 ** 53 } }, RangeError, /estimate.units is past 2\^53 as a Number and no longer exact: pass a BigInt/],
    [{ estimate: { costMicros: 2n ** 63n } }, RangeError, /estimate.costMicros must be >= 0 and < 2\^63/],
    [{ estimate: { units: -1 } }, RangeError, /must be >= 0/],
    [{ estimate: { units: 1.5 } }, TypeError, /estimate.units must be an integer or a BigInt/],
    [{ estimate: { units: '12' } }, TypeError, /must be an integer or a BigInt/],
    [{ estimate: 12 }, TypeError, /estimate must be an object/],
  ];
  for (const [options, ErrorClass, words] of cases) {
    const journal = new FakeJournal();
    const outcome = await execute(
      async (c) => {
        assert.throws(() => c.call('chat', 1, options), checks(ErrorClass, words));
        return 'checked';
      },
      context(new JournalBuilder(), journal),
      null,
    );
    assert.equal(outcome.kind, 'result', words.source);
    assert.deepEqual(journal.calls, []);
  }
});

test('a recorded BudgetExceeded failure rejects with BudgetExceededError on replay; other failures stay plain', async () => {
  const builder = new JournalBuilder().scheduled(0, 'chat', 1).remoteFailed('chat', 'BudgetExceeded', 'run budget: 5 over').scheduled(1, 'tool', 2).remoteFailed('tool', 'Boom', 'no');
  /** @type {any} */
  let over;
  /** @type {any} */
  let plain;
  await execute(async (c) => {
    over = await c.call('chat', 1, { estimate: { units: 10 } }).catch((error) => error);
    plain = await c.call('tool', 2).catch((error) => error);
  }, context(builder, new FakeJournal()), null);
  assert.ok(over instanceof BudgetExceededError && over instanceof StepFailedError);
  assert.equal(over.name, 'BudgetExceededError');
  assert.deepEqual([over.errorType, over.errorMessage], ['BudgetExceeded', 'run budget: 5 over']);
  assert.ok(plain instanceof StepFailedError && !(plain instanceof BudgetExceededError));
});

// -- step tasks ------------------------------------------------------------------------------

const task = { workflow_id: 'wf-9', fence: 3, step_id: 'chat', step_type: 'chat', workflow_type: '' };

class StepJournal {
  constructor(loaded, refusal = '') {
    this.loaded = loaded;
    this.refusal = refusal;
    this.calls = [];
  }

  async call(method, request) {
    this.calls.push([method, structuredClone(request)]);
    if (method === 'LoadStep' && this.refusal) throw new JournalCallError('FAILED_PRECONDITION', 'closed', this.refusal);
    if (method === 'LoadStep') return this.loaded;
    return { event_id: 1 };
  }

  recorded(method) {
    return this.calls.filter(([m]) => m === method).map(([, r]) => r);
  }
}

const loaded = (fields = {}) => ({
  workflow_type: 'agent',
  step_type: 'chat',
  input: toPayload('hello'),
  attempt: 1,
  retry: new RetryPolicy({ maximumAttempts: 1 }).toProto(),
  ...fields,
});

test('the handler reports its usage; the last report counts; nothing reported leaves it unset', async () => {
  const reporting = new Map([['chat', (input, info) => {
    info.reportUsage({ units: 10, costMicros: 7 });
    info.reportUsage({ units: 1200n, costMicros: 2n ** 62n });
    return 'hi';
  }]]);
  const usage = new UsageReport();
  assert.equal(await runStepTask(task, new StepJournal(loaded()), reporting, { log, usage }), 'completed');
  assert.deepEqual(usage.forTaskDone(), { units: '1200', cost_micros: '4611686018427387904' });

  const quiet = new UsageReport();
  await runStepTask(task, new StepJournal(loaded()), new Map([['chat', () => 'ok']]), { log, usage: quiet });
  assert.equal(quiet.forTaskDone(), null);

  const failing = new UsageReport();
  const bad = new Map([['chat', (input, info) => info.reportUsage({ units: 2 ** 60 })]]);
  const journal = new StepJournal(loaded());
  assert.equal(await runStepTask(task, journal, bad, { log, usage: failing }), 'failed');
  assert.match(journal.recorded('RecordStep')[0].failure.message, /past 2\^53/);
  assert.equal(failing.forTaskDone(), null); // it ran
});

test('a load that runs nothing (STEP_CLOSED, WORKFLOW_CLOSED, STALE_FENCE) leaves zero usage', async () => {
  for (const refusal of ['STEP_CLOSED', 'WORKFLOW_CLOSED', 'STALE_FENCE']) {
    let ran = false;
    const usage = new UsageReport();
    const steps = new Map([['chat', () => { ran = true; }]]);
    await assert.rejects(runStepTask(task, new StepJournal(loaded(), refusal), steps, { log, usage }), LeaseLostError);
    assert.equal(ran, false);
    assert.deepEqual(usage.forTaskDone(), { units: 0, cost_micros: 0 });
  }
});

test('a task over budget records a final BudgetExceeded failure without running, lost attempt or not', async () => {
  for (const attemptLost of [false, true]) {
    let ran = false;
    const usage = new UsageReport();
    const journal = new StepJournal(loaded({ attempt: 2, attempt_lost: attemptLost }));
    const steps = new Map([['chat', () => { ran = true; }]]);
    const over = { ...task, budget_exceeded: 'run budget: 2000 units over by 500' };
    assert.equal(await runStepTask(over, journal, steps, { log, usage }), 'failed');
    assert.equal(ran, false);
    const [record] = journal.recorded('RecordStep');
    assert.equal(record.step_task, true);
    assert.equal(record.attempt, 2);
    assert.equal(record.retry_delay, undefined);
    assert.deepEqual(record.failure, { type: 'BudgetExceeded', message: 'run budget: 2000 units over by 500', stack_trace: '' });
    assert.deepEqual(usage.forTaskDone(), { units: 0, cost_micros: 0 });
  }
});

test('a local step may report usage: checked, and ignored', async () => {
  const outcome = await execute(async (c) => c.step('work', (info) => {
    info.reportUsage({ units: 3 });
    return 1;
  }), context(new JournalBuilder(), new FakeJournal()), null);
  assert.equal(outcome.kind, 'result');
});

test('the worker sends TaskDone with the usage on the wire: reported, unset, zero', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    taskQueue: 'tools',
    logger: null,
    steps: {
      charge: (input, info) => {
        if (input.amount === 2) info.reportUsage({ units: 2n ** 60n, costMicros: 31 });
        return 'ok';
      },
    },
  });
  const running = worker.run();
  const dones = () => cluster.messages.filter((m) => m.message === 'task_done').map((m) => m.task_done);
  try {
    await cluster.until(() => cluster.hellos.length === 1, 'the hello');
    cluster.push({ workflow_id: 'wf-1', fence: 4, step_id: 'charge', step_type: 'charge' });
    await cluster.until(() => dones().length === 1, 'TaskDone');
    cluster.loadStep = { ...cluster.loadStep, input: toPayload({ amount: 3 }) };
    cluster.push({ workflow_id: 'wf-2', fence: 4, step_id: 'charge', step_type: 'charge' });
    await cluster.until(() => dones().length === 2, 'TaskDone');
    cluster.push({ workflow_id: 'wf-3', fence: 4, step_id: 'charge', step_type: 'charge', budget_exceeded: 'namespace budget: over' });
    await cluster.until(() => dones().length === 3, 'TaskDone');
    const [reported, quiet, over] = dones();
    // The fake scheduler reads int64 as Number: 2^60 is exact as a power of two.
    assert.deepEqual([Number(reported.usage.units), Number(reported.usage.cost_micros)], [2 ** 60, 31]);
    assert.equal(quiet.usage, null);
    assert.deepEqual([Number(over.usage.units), Number(over.usage.cost_micros)], [0, 0]);
    const records = cluster.journalCalls.filter(([m]) => m === 'RecordStep').map(([, r]) => r);
    assert.deepEqual(records[2].failure.type, 'BudgetExceeded');
    assert.deepEqual(fromPayload(records[1].output), 'ok');
  } finally {
    worker.stop();
    await running;
    cluster.stop();
  }
});

// -- the model-usage helper -----------------------------------------------------------------

const PRICES = { inputMicrosPerMillion: 2_500_000, outputMicrosPerMillion: 10_000_000 };

test('usageFromModelResponse: units are the total; each cost is rounded up to a whole micro', () => {
  const response = { usage: { prompt_tokens: 1_000_003, completion_tokens: 250_001, total_tokens: 1_250_010 } };
  // 1,000,003 x 2.5 = 2,500,007.5 -> 2,500,008; 250,001 x 10 = 2,500,010.
  assert.deepEqual(usageFromModelResponse(response, PRICES), { units: 1_250_010n, costMicros: 5_000_018n });
  // Without a total: prompt + completion. 7 x 2.5 = 17.5 -> 18; 3 x 10 = 30.
  assert.deepEqual(usageFromModelResponse({ usage: { prompt_tokens: 7, completion_tokens: 3 } }, PRICES), { units: 10n, costMicros: 48n });
  assert.deepEqual(usageFromModelResponse({ usage: { prompt_tokens: 1, completion_tokens: 0 } }, { inputMicrosPerMillion: 1, outputMicrosPerMillion: 1 }), { units: 1n, costMicros: 1n });
});

test('usageFromModelResponse: BigInt token counts and prices stay exact past 2^53', () => {
  const response = { usage: { prompt_tokens: 2n ** 60n, completion_tokens: 2n ** 55n + 1n, total_tokens: 2n ** 60n + 2n ** 55n + 1n } };
  // 2^60 x 3 / 1e6 = 3,458,764,513,820.54 -> ...821; (2^55 + 1) x 7 / 1e6 = 252,201,579,132.75 -> ...133.
  assert.deepEqual(usageFromModelResponse(response, { inputMicrosPerMillion: 3n, outputMicrosPerMillion: 7 }), {
    units: 1_188_950_301_625_810_945n,
    costMicros: 3_710_966_092_954n,
  });
});

test('usageFromModelResponse refuses responses without whole token counts, and bad prices', () => {
  assert.throws(() => usageFromModelResponse({}, PRICES), /has no usage/);
  assert.throws(() => usageFromModelResponse({ usage: { prompt_tokens: -1 } }, PRICES), /usage.prompt_tokens must be >= 0/);
  assert.throws(() => usageFromModelResponse({ usage: { prompt_tokens: 2 ** 60 } }, PRICES), /past 2\^53/);
  assert.throws(() => usageFromModelResponse({ usage: { prompt_tokens: 1 } }, { inputMicrosPerMillion: 2.5, outputMicrosPerMillion: 1 }), TypeError);
});
