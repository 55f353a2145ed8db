// The workflows and remote steps the replay cases (tests/replay/cases/*.json) run, by name: the
// Node.js mirror of tests/replay/workflows.py, each written to the spec there (repeated above
// it). Errors a spec "raises" are thrown with a `name` of that type name; step bodies return at
// once.

import { ApprovalExpiredError, BudgetExceededError, RetryPolicy, SignalTimeoutError, StepFailedError, WorkflowCancelledError, modelStep } from '../../src/index.js';

// Retries in the cases: attempt n fails, the next one is due 1s, 2s, 4s... later; 3 attempts.
const RETRY = new RetryPolicy({ initialInterval: 1, backoffCoefficient: 2, maximumAttempts: 3 });
const NO_RETRY = new RetryPolicy({ maximumAttempts: 1 });
// The model calls' prices: 2.50 per million input tokens, 10.00 per million output tokens.
const MODEL_PRICES = { inputMicrosPerMillion: 2_500_000, outputMicrosPerMillion: 10_000_000 };
const DEFAULT = new RetryPolicy();

/** An error whose type name (its `name`) is `name`. */
function named(name, message) {
  const error = new Error(message);
  error.name = name;
  return error;
}

const declined = () => {
  throw named('PaymentDeclined', 'card declined');
};

/** @type {Record<string, {run: (ctx: any, input?: any) => Promise<any>, retry?: RetryPolicy}>} */
const CATALOGUE = {
  // Step "reserve" returns "reserved", step "charge" returns "charged"; returns both.
  two_steps: { run: async (ctx) => [await ctx.step('reserve', () => 'reserved'), await ctx.step('charge', () => 'charged')] },

  // Step "ping" three times, returning 1, 2, 3 (step ids ping, ping#2, ping#3); returns the
  // three results.
  repeat: {
    run: async (ctx) => {
      const results = [];
      for (const n of [1, 2, 3]) results.push(await ctx.step('ping', () => n));
      return results;
    },
  },

  // Step "charge" (policy: 1s initial interval, backoff 2, 3 attempts) raises
  // PaymentDeclined("card declined") on every attempt; uncaught; returns "paid" if it ever returns.
  flaky: {
    retry: RETRY,
    run: async (ctx) => {
      await ctx.step('charge', declined);
      return 'paid';
    },
  },

  // Step "charge" (1 attempt) raises PaymentDeclined("card declined"); the workflow catches the
  // step's failure, runs step "refund" returning "refunded", and returns
  // {"failed": <the failure's type>, "refund": "refunded"}.
  compensate: {
    retry: NO_RETRY,
    run: async (ctx) => {
      try {
        await ctx.step('charge', declined);
      } catch (error) {
        if (!(error instanceof StepFailedError)) throw error;
        const refund = await ctx.step('refund', () => 'refunded');
        return { failed: error.errorType, refund };
      }
      return { failed: '', refund: '' };
    },
  },

  // Raises OrderRejected("out of stock") without a durable call.
  reject: {
    run: async () => {
      throw named('OrderRejected', 'out of stock');
    },
  },

  // Step "echo" returns the input unchanged; returns the step's result.
  echo: { run: async (ctx, value) => ctx.step('echo', () => value) },

  // Sleeps 60 seconds (ctx.sleep), then step "wake" returns "awake"; returns it.
  nap: {
    run: async (ctx) => {
      await ctx.sleep(60);
      return String(await ctx.step('wake', () => 'awake'));
    },
  },

  // Sleeps until 2030-01-02T00:00:00Z (ctx.sleepUntil); returns "morning".
  nap_until: {
    run: async (ctx) => {
      await ctx.sleepUntil(new Date('2030-01-02T00:00:00Z'));
      return 'morning';
    },
  },

  // Waits for signal "approve" (no timeout); returns its payload.
  approval: { run: async (ctx) => ctx.waitForSignal('approve') },

  // Takes signals "msg" one per turn into `seen` (from state {seen, limit}); before a turn, once
  // ctx.info.historyLength reaches `limit`, continues as new with {seen, limit}; with 3 seen,
  // returns {seen, length: historyLength}.
  turns: {
    run: async (ctx, state) => {
      const seen = [...state.seen];
      for (;;) {
        if (ctx.info.historyLength >= state.limit) await ctx.continueAsNew({ seen, limit: state.limit });
        seen.push(await ctx.waitForSignal('msg'));
        if (seen.length >= 3) return { seen, length: ctx.info.historyLength };
      }
    },
  },

  // Waits for signal "approve" twice; returns both payloads in order.
  approval_twice: { run: async (ctx) => [await ctx.waitForSignal('approve'), await ctx.waitForSignal('approve')] },

  // Waits for signal "approve" with a 30-second timeout; returns its payload, or "timed out" on
  // the timeout.
  approval_timeout: {
    run: async (ctx) => {
      try {
        return await ctx.waitForSignal('approve', { timeout: 30 });
      } catch (error) {
        if (error instanceof SignalTimeoutError) return 'timed out';
        throw error;
      }
    },
  },

  // Asks approval "deploy" of {v: 2} (timeout 60 s, approvers ["operator"], escalating after
  // 30 s to ["admin"]); on escalation sets state "escalated" to the approval's id; returns
  // {approved, by, reason} of the decision, or "expired" when it expires.
  sign_off: {
    run: async (ctx) => {
      try {
        const decision = await ctx.approval('deploy', { v: 2 }, {
          timeout: 60,
          escalateAfter: 30,
          approvers: ['operator'],
          escalateTo: ['admin'],
          onEscalated: async (escalation) => ctx.setState('escalated', escalation.approvalId),
        });
        return { approved: decision.approved, by: decision.decidedBy, reason: decision.reason };
      } catch (error) {
        if (error instanceof ApprovalExpiredError) return 'expired';
        throw error;
      }
    },
  },

  // Drains signal "item" (ctx.drainSignals); returns the payloads, oldest first.
  drain: { run: async (ctx) => ctx.drainSignals('item') },

  // Sets state "stage" to "started", runs step "work" returning 1, sets "stage" to "done";
  // returns "ok".
  staged: {
    run: async (ctx) => {
      await ctx.setState('stage', 'started');
      await ctx.step('work', () => 1);
      await ctx.setState('stage', 'done');
      return 'ok';
    },
  },

  // Calls remote step "resize" with input {"width": 10} on the workflow's task queue (retry:
  // the workflow's policy, 1s initial interval, backoff 2, 60s maximum interval, 3 attempts);
  // returns its result.
  remote: { retry: RETRY, run: async (ctx) => ctx.call('resize', { width: 10 }) },

  // Calls remote step "resize" with input {"width": 10}, keys ["provider:openai",
  // "tenant:acme"] and estimate 2000 units, 30000 cost micros; returns its result, or, when it
  // raises BudgetExceededError, "over budget: " followed by the error's message.
  budgeted: {
    retry: RETRY,
    run: async (ctx) => {
      try {
        return await ctx.call('resize', { width: 10 }, { keys: ['provider:openai', 'tenant:acme'], estimate: { units: 2000, costMicros: 30_000n } });
      } catch (error) {
        if (!(error instanceof BudgetExceededError)) throw error;
        return `over budget: ${error.errorMessage}`;
      }
    },
  },

  // ctx.modelCall(model "m-1", messages [{"role": "user", "content": "Hi"}], maxTokens 10,
  // prices MODEL_PRICES); returns the response.
  ask_model: {
    retry: RETRY,
    run: async (ctx) => ctx.modelCall({ model: 'm-1', messages: [{ role: 'user', content: 'Hi' }], maxTokens: 10, prices: MODEL_PRICES }),
  },

  // Gathers remote steps "left" (input 1) and "right" (input 2) on task queue "pool"; returns
  // both results in call order.
  fan_out: {
    retry: RETRY,
    run: async (ctx) => ctx.gather([ctx.call('left', 1, { taskQueue: 'pool' }), ctx.call('right', 2, { taskQueue: 'pool' })]),
  },

  // Step "reserve" returns "reserved", sleeps 3600 seconds, step "ship" returns "shipped"; on
  // cancellation runs step "release" returning "released" and raises the cancellation again;
  // returns "shipped".
  cancellable: {
    run: async (ctx) => {
      try {
        await ctx.step('reserve', () => 'reserved');
        await ctx.sleep(3600);
        return String(await ctx.step('ship', () => 'shipped'));
      } catch (error) {
        if (!(error instanceof WorkflowCancelledError)) throw error;
        await ctx.step('release', () => 'released');
        throw error;
      }
    },
  },

  // Step "report" (policy: 3 attempts) returns 40 lists nested in one another (deeper than
  // history takes); returns the step's result.
  oversized: { retry: RETRY, run: async (ctx) => ctx.step('report', () => nested(40)) },

  // Step "a" returns "a"; notes ctx.info.historyLength; ctx.setState("k", 1); returns [the
  // length noted, ctx.info.historyLength].
  measured: {
    run: async (ctx) => {
      await ctx.step('a', () => 'a');
      const afterStep = ctx.info.historyLength;
      await ctx.setState('k', 1);
      return [afterStep, ctx.info.historyLength];
    },
  },

  // ctx.uuid4(), then returns it.
  unique: { run: async (ctx) => ctx.uuid4() },

  // Step "prepare" returns "prepared"; then if ctx.patched("v2"), step "fetch_v2" returns
  // "new", else step "fetch" returns "old"; asks ctx.patched("v2") again; returns {"got": the
  // fetch's result, "again": the second answer, "length": ctx.info.historyLength}.
  patched: {
    run: async (ctx) => {
      await ctx.step('prepare', () => 'prepared');
      const got = ctx.patched('v2') ? await ctx.step('fetch_v2', () => 'new') : await ctx.step('fetch', () => 'old');
      const again = ctx.patched('v2');
      return { got, again, length: ctx.info.historyLength };
    },
  },

  // Step "prepare" returns "prepared"; ctx.deprecate_patch("v2"); step "fetch_v2" returns
  // "new"; returns it.
  deprecated: {
    run: async (ctx) => {
      await ctx.step('prepare', () => 'prepared');
      ctx.deprecatePatch('v2');
      return String(await ctx.step('fetch_v2', () => 'new'));
    },
  },

  // Runs child workflow "adder" with input {"a": 2, "b": 3} (its default id, the workflow's
  // task queue, parent close policy "terminate"); returns its result.
  parent: { run: async (ctx) => ctx.child('adder', { a: 2, b: 3 }) },

  // Starts child "adder" with input 1, id "kid-a", task queue "pool", policy "abandon", then
  // child "adder" with input 2, id "kid-b", policy "request_cancel"; waits for both and returns
  // their results in call order.
  parent_of_two: {
    run: async (ctx) => {
      const first = await ctx.startChild('adder', 1, { id: 'kid-a', taskQueue: 'pool', parentClosePolicy: 'abandon' });
      const second = await ctx.startChild('adder', 2, { id: 'kid-b', parentClosePolicy: 'request_cancel' });
      return ctx.gather([first, second]);
    },
  },
};

/**
 * `depth` empty lists, each in the one around it.
 * @param {number} depth
 * @returns {unknown[]}
 */
function nested(depth) {
  let value = [];
  for (let i = 1; i < depth; i += 1) value = [value];
  return value;
}

/** The catalogue as the runner takes it: type name -> {fn, retry}. */
export const WORKFLOWS = new Map(Object.entries(CATALOGUE).map(([name, { run, retry }]) => [name, { fn: run, retry: retry ?? DEFAULT }]));

/** The remote steps, by step type. */
export const REMOTE_STEPS = new Map(
  Object.entries({
    // Remote step: returns its input {"width": w} as {"width": w, "done": true}.
    resize: (image) => ({ width: image.width, done: true }),
    // Remote step "model_call": modelStep of a client that always answers {"model": "m-1",
    // "choices": [{"message": {"role": "assistant", "content": "Hello"}}], "usage":
    // {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}, at MODEL_PRICES.
    model_call: modelStep(
      {
        chat: {
          completions: {
            create: () => ({
              model: 'm-1',
              choices: [{ message: { role: 'assistant', content: 'Hello' } }],
              usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
            }),
          },
        },
      },
      { 'm-1': MODEL_PRICES },
    ),
    // Remote step: raises ImageTooLarge("too large").
    unreliable: () => {
      throw named('ImageTooLarge', 'too large');
    },
  }),
);

// Sagas and standing objectives (tests/replay/workflows.py, same specs).
const SAGA_AND_LOOP_CATALOGUE = {
  // In a saga (ctx.saga()): step "reserve" returns "reserved", then compensation "release"
  // (returns "released") is added; step "charge" returns "charged", then compensation "refund"
  // (returns "refunded") is added; step "ship" (1 attempt) raises PaymentDeclined("card
  // declined"); returns "shipped" if it ever returns.
  saga: {
    retry: NO_RETRY,
    run: async (ctx) => {
      await ctx.saga(async (trip) => {
        await ctx.step('reserve', () => 'reserved');
        trip.addCompensation('release', () => 'released');
        await ctx.step('charge', () => 'charged');
        trip.addCompensation('refund', () => 'refunded');
        await ctx.step('ship', declined);
      });
      return 'shipped';
    },
  },

  // As "saga", with ctx.sleep(3600) in place of step "ship"; returns "slept".
  saga_cancellable: {
    retry: NO_RETRY,
    run: async (ctx) => {
      await ctx.saga(async (trip) => {
        await ctx.step('reserve', () => 'reserved');
        trip.addCompensation('release', () => 'released');
        await ctx.step('charge', () => 'charged');
        trip.addCompensation('refund', () => 'refunded');
        await ctx.sleep(3600);
      });
      return 'slept';
    },
  },

  // ctx.agentLoop with objective spec.objective, maxTurns spec.max_turns, budget spec.budget
  // (absent: none), isMet: the state has spec.target items, default signals ("steer",
  // "abandon"); each turn runs step "work" returning the turn's objective, and resolves with
  // {state: the last state (or []) + [that result], units: 10}; returns the result.
  agent_loop: {
    run: async (ctx, spec) =>
      ctx.agentLoop(
        async (turn) => {
          const worked = await ctx.step('work', () => turn.objective);
          return { state: [...(turn.state ?? []), worked], units: 10 };
        },
        { objective: spec.objective, maxTurns: spec.max_turns, budget: spec.budget ?? null, isMet: (state) => state.length >= spec.target },
      ),
  },
};
for (const [name, { run, retry }] of Object.entries(SAGA_AND_LOOP_CATALOGUE)) WORKFLOWS.set(name, { fn: run, retry: retry ?? DEFAULT });
