// Sagas and standing objectives in the Node.js SDK, past what the shared replay cases hold:
// what compensates and what does not, failures carried, arguments checked, a loop resumed
// after continueAsNew.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execute } from '../src/runner.js';
import { NO_RETRY } from '../src/retry.js';
import { StepFailedError } from '../src/errors.js';
import { fromPayload } from '../src/payload.js';
import { FakeJournal, JournalBuilder, context } from './helpers.js';

const fails = (name, message) => () => {
  const error = new Error(message);
  error.name = name;
  throw error;
};

/** Run `fn` on a fresh journal; its outcome and the step ids whose outcomes it recorded. */
async function run(fn) {
  const journal = new FakeJournal();
  const outcome = await execute(fn, context(new JournalBuilder(), journal, NO_RETRY), null);
  const steps = journal.recorded('RecordStep').map((r) => r.step_id);
  return { outcome, steps, journal };
}

test('a saga that ends normally compensates nothing, and resolves with its result', async () => {
  const { outcome, steps } = await run((ctx) =>
    ctx.saga(async (saga) => {
      await ctx.step('reserve', () => 'reserved');
      saga.addCompensation('release', () => 'released');
      return 'done';
    }),
  );
  assert.equal(fromPayload(outcome.value), 'done');
  assert.deepEqual(steps, ['reserve']);
});

test("a failed compensation is carried by the body's error, and the others still run", async () => {
  /** @type {any} */
  let caught = null;
  const { steps } = await run(async (ctx) => {
    try {
      await ctx.saga(async (saga) => {
        saga.addCompensation('release', () => 'released');
        saga.addCompensation('refund', fails('RefundRefused', 'already settled'));
        await ctx.step('ship', fails('OutOfStock', 'no stock'));
      });
    } catch (error) {
      caught = error;
    }
  });
  assert.ok(caught instanceof StepFailedError && caught.stepId === 'ship');
  assert.deepEqual(steps, ['ship', 'refund', 'release']);
  assert.deepEqual(/** @type {any} */ (caught).compensationFailures.map((f) => [f.stepId, f.errorType]), [['refund', 'RefundRefused']]);
  assert.match(caught.stack, /compensation 'refund' failed too/);
});

test("the code's own error compensates and is thrown again", async () => {
  const { outcome, steps } = await run((ctx) =>
    ctx.saga(async (saga) => {
      await ctx.step('reserve', () => 'reserved');
      saga.addCompensation('release', () => 'released');
      throw new RangeError('decided in code');
    }),
  );
  assert.equal(outcome.kind, 'failure');
  assert.equal(outcome.value.type, 'RangeError');
  assert.deepEqual(steps, ['reserve', 'release']);
});

test('continuing as new in a saga compensates nothing', async () => {
  const { outcome, steps } = await run((ctx) =>
    ctx.saga(async (saga) => {
      await ctx.step('reserve', () => 'reserved');
      saga.addCompensation('release', () => 'released');
      await ctx.continueAsNew({ next: 1 });
    }),
  );
  assert.equal(outcome.kind, 'continue_as_new');
  assert.deepEqual(steps, ['reserve']);
});

test('a remote compensation is scheduled when it runs', async () => {
  const { outcome, journal } = await run(async (ctx) => {
    const saga = ctx.saga(async (s) => {
      s.addRemoteCompensation('refund_card', { order: 7 }, { taskQueue: 'payments' });
      throw new Error('failed');
    });
    return saga;
  });
  assert.equal(outcome.kind, 'suspend'); // waiting for the remote step's outcome
  const [scheduled] = journal.recorded('ScheduleStep');
  assert.deepEqual([scheduled.step_id, scheduled.task_queue, fromPayload(scheduled.input)], ['refund_card', 'payments', { order: 7 }]);
});

test('compensations are checked when registered', async () => {
  await run(async (ctx) =>
    ctx.saga(async (saga) => {
      assert.throws(() => saga.addCompensation('$refund', () => null), TypeError);
      assert.throws(() => saga.addCompensation('refund', 'not a function'), TypeError);
      assert.throws(() => saga.addRemoteCompensation(''), TypeError);
    }),
  );
  await assert.rejects(run((ctx) => ctx.saga('not a function')).then(({ outcome }) => {
    if (outcome.kind === 'failure') throw new TypeError(outcome.value.message);
  }), TypeError);
});

test('a loop resumed from a carry counts on and keeps its steering', async () => {
  const seen = [];
  const { outcome, journal } = await run((ctx) =>
    ctx.agentLoop(
      async (turn) => {
        seen.push(turn);
        return { state: (turn.state ?? 0) + 1, units: 5 };
      },
      { objective: 'ignored when resumed', maxTurns: 5, resume: { objective: 'find trains', state: 3, turns: 3, spent: 15, guidance: ['no night trains'] } },
    ),
  );
  assert.deepEqual(seen.map((turn) => turn.number), [4, 5]);
  assert.deepEqual(seen[0].guidance, ['no night trains']);
  assert.deepEqual(fromPayload(outcome.value), { reason: 'max_turns', turns: 5, objective: 'find trains', state: 5, spent: 25, guidance: ['no night trains'] });
  const published = journal.recorded('SetState');
  assert.equal(fromPayload(published.at(-1).value).status, 'max_turns');
});

test('a turn continues as new with its carry', async () => {
  const { outcome } = await run((ctx) =>
    ctx.agentLoop(
      async (turn) => {
        if (turn.number === 2) await ctx.continueAsNew({ loop: turn.carry() });
        return { state: ['a'], units: 1 };
      },
      { objective: 'o', maxTurns: 9 },
    ),
  );
  assert.equal(outcome.kind, 'continue_as_new');
  assert.deepEqual(fromPayload(outcome.value.input), { loop: { objective: 'o', state: ['a'], turns: 1, spent: 1, guidance: [] } });
});

/** @type {[Record<string, any>, string][]} */
const refusedOptions = [
  [{ maxTurns: 0 }, 'RangeError'],
  [{ maxTurns: 2, budget: -1 }, 'RangeError'],
  [{ maxTurns: 2, isMet: 'yes' }, 'TypeError'],
  [{ maxTurns: 2, steeringSignal: '$steer' }, 'TypeError'],
  [{ maxTurns: 2, resume: ['not', 'a', 'carry'] }, 'TypeError'],
];
for (const [options, kind] of refusedOptions) {
  test(`loop options ${JSON.stringify(options)} are refused (${kind}) before any call`, async () => {
    const { outcome, journal } = await run((ctx) => ctx.agentLoop(async () => ({ state: null }), { objective: 'o', ...options }));
    assert.equal(outcome.kind, 'failure');
    assert.equal(outcome.value.type, kind);
    assert.deepEqual(journal.calls, []);
  });
}

for (const [returned, kind] of [['state', 'TypeError'], [{ state: null, units: -1 }, 'RangeError']]) {
  test(`a turn resolving with ${JSON.stringify(returned)} fails the loop (${kind})`, async () => {
    const { outcome } = await run((ctx) => ctx.agentLoop(async () => returned, { objective: 'o', maxTurns: 3 }));
    assert.equal(outcome.kind, 'failure');
    assert.equal(outcome.value.type, kind);
  });
}
