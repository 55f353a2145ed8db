#!/usr/bin/env node
// A Node worker for Python end-to-end tests: the workflows `chain_turns` (as in
// tests/e2e/chain_workflows.py), `node_order`, `clock_reading` and
// `cancel_path_switch` (as in tests/e2e/drifting_workflows.py), `node_long` (one step of
// `input.ms` that honours its AbortSignal unless `input.ignore_signal`, and appends a `body`
// line with its fence at its start and end), `node_limits`, `node_gated` and `node_bulky`
// (tests/e2e/test_isolation.py), `echo_payloads` (tests/e2e/payload_workflows.py's twin), `paged_replay`
// (tests/e2e/paged_workflows.py's twin), `node_model` (a model call, ctx.modelCall, answered on `input.queue`, and the remote step
// `model_call` answering it offline), `node_chat` (a loop of `input.turns` signals,
// tests/e2e/test_node_sticky.py), `node_streams` and the remote step `node_write`
// (tests/e2e/stream_workflows.py's twins), `release` (tests/e2e/patch_workflows_v*.py's twin, in the
// version RELEASE_CODE names: v1, v2 or v3), `node_saga_trip` (tests/e2e/saga_workflows.mjs),
// `node_ask` (tests/e2e/approval_workflows.py's `ask`), `node_parent` (children that a Python
// worker runs, tests/e2e/test_children.py), and the remote step types `notify`, `flaky`, `gated`,
// `square` (which never ends on the worker named in its input's `stall_on`) and `crash` (which
// kills the worker). Every step execution appends one JSON line to the ledger file. Prints
// "connected" once welcomed; drains on SIGTERM/SIGINT. With CLOCK_AHEAD_MS in the
// environment, the process's wall clock (Date) runs that far ahead.
//
//   node tests/e2e/node_worker.mjs --scheduler HOST:PORT --history HOST:PORT --task-queue Q \
//     --identity ID --concurrency N --ledger FILE   (or --cells "a=H/S;b=H/S" for several cells)

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { ApprovalExpiredError, ChildWorkflowFailedError, RetryPolicy, Worker, WorkflowCancelledError, modelStep, modelText, parseCells } from '../../sdk/node/src/index.js';
import { sagaWorkflows } from './saga_workflows.mjs';

const { values: args } = parseArgs({
  options: {
    scheduler: { type: 'string', default: 'localhost:7402' },
    history: { type: 'string', default: 'localhost:7401' },
    cells: { type: 'string' }, // several cells: PERDURE_CELLS's spelling, instead of the two above
    'task-queue': { type: 'string', default: 'default' },
    identity: { type: 'string', default: `node:${process.pid}` },
    concurrency: { type: 'string', default: '10' },
    ledger: { type: 'string' },
    'shutdown-grace-ms': { type: 'string', default: '10000' },
  },
});
const identity = args.identity;

const ahead = Number(process.env.CLOCK_AHEAD_MS ?? 0);
if (ahead) {
  // This worker's wall clock, ahead of the database's (as a worker host's can be).
  const RealDate = Date;
  globalThis.Date = class extends RealDate {
    constructor(...given) {
      if (given.length) super(...given);
      else super(RealDate.now() + ahead);
    }

    static now() {
      return RealDate.now() + ahead;
    }
  };
}

/** One JSON line per step execution, one write per line. */
function ledger(kind, info) {
  if (!args.ledger) return;
  const line = JSON.stringify({
    kind,
    workflow_id: info.workflowId,
    step_id: info.stepId,
    attempt: info.attempt,
    identity,
  });
  fs.appendFileSync(args.ledger, `${line}\n`);
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll every 50 ms until `file` exists, calling `between` between polls. */
async function waitForFile(file, between = () => {}) {
  while (!fs.existsSync(file)) {
    between();
    await pause(50);
  }
}

async function nodeOrder(ctx, input) {
  input = input ?? {};
  const reserved = await ctx.step('reserve', (info) => {
    ledger('reserve', info);
    return { item: input.item ?? null };
  });
  await ctx.setState('phase', 'reserved');
  await ctx.step('hold', async (info) => {
    ledger('hold', info);
    if (input.gate) await waitForFile(input.gate);
    return null;
  });
  await ctx.sleep(input.sleep_seconds ?? 0.2);
  const approval = await ctx.waitForSignal('approve');
  const charge = input.charge_queue
    ? await ctx.call('charge', { amount: input.amount ?? 1 }, { taskQueue: input.charge_queue })
    : null;
  await ctx.setState('phase', 'shipping');
  const shipped = await ctx.step('ship', (info) => {
    ledger('ship', info);
    return { shipped: true };
  });
  return { reserved, approval, charge, shipped };
}

async function clockReading(ctx) {
  return (await ctx.now()).toISOString();
}

/** Cancelled, compensates and waits for "finish", unless the version file says "plain". */
async function cancelPathSwitch(ctx, input) {
  try {
    await ctx.waitForSignal('go');
  } catch (error) {
    if (!(error instanceof WorkflowCancelledError)) throw error;
    if (fs.readFileSync(input.version_file, 'utf8').trim() !== 'plain') {
      await ctx.step('release', () => 'released');
      await ctx.waitForSignal('finish');
    }
    throw error;
  }
  return 'done';
}

/** One body line: `event` (start, returned, aborted) of a step body under `info.fence`. */
function body(event, info) {
  if (!args.ledger) return;
  const line = { kind: 'body', event, workflow_id: info.workflowId, fence: info.fence, at: Date.now(), identity };
  fs.appendFileSync(args.ledger, `${JSON.stringify(line)}\n`);
}

async function nodeLong(ctx, input) {
  return ctx.step('long', async (info) => {
    body('start', info);
    try {
      // `ignore_signal`: a body that will not stop, as careless code would.
      await sleep(input.ms, undefined, input.ignore_signal ? {} : { signal: info.signal });
    } catch (error) {
      body('aborted', info);
      throw error;
    }
    body('returned', info);
    return { fence: info.fence };
  });
}

/** A step whose first attempt goes silent until its heartbeat timeout aborts it. */
async function nodeLimits(ctx) {
  const retry = new RetryPolicy({ initialInterval: 0.2, maximumAttempts: 3 });
  return ctx.step('silent', async (info) => {
    if (info.attempt === 1) {
      await new Promise((resolve) => info.signal.addEventListener('abort', resolve, { once: true }));
      process.stdout.write(`aborted: ${info.signal.reason?.name}\n`);
      return 'abandoned';
    }
    return info.attempt;
  }, { heartbeatTimeout: 0.5, retry });
}

/** One step that holds the run's lease until `input.gate` exists, then another. */
async function nodeGated(ctx, input) {
  await ctx.step('held', async (info) => {
    ledger('held', info);
    await waitForFile(input.gate);
    return null;
  });
  return ctx.step('after', () => 'after');
}

/** `input.count` steps of `input.size` bytes of output; with `reload`, then a short sleep, so
 * that the run is loaded again with its whole journal. */
async function nodeBulky(ctx, input) {
  for (let index = 0; index < input.count; index++) {
    await ctx.step(`output_${index}`, () => 'x'.repeat(input.size));
  }
  if (input.reload) await ctx.sleep(0.5);
  return input.count;
}

/** tests/e2e/stream_workflows.py's write: attempt k emits "a<k>.0 ", "a<k>.1 ", ... (`pause`
 * seconds apart), then fails (the first `fail_attempts` attempts) or returns the text. */
async function nodeWrite(input, info) {
  const words = Array.from({ length: input.n }, (_, i) => `a${info.attempt}.${i} `);
  for (const word of words) {
    info.emit(word);
    if (input.pause) await pause(input.pause * 1000);
  }
  if (info.attempt <= (input.fail_attempts ?? 0)) {
    const error = new Error(`attempt ${info.attempt} fails after emitting`);
    error.name = 'StreamBrokeError';
    throw error;
  }
  return words.join('');
}

const streamRetry = new RetryPolicy({ initialInterval: 0.1, backoffCoefficient: 1, maximumAttempts: 3 });

/** tests/e2e/stream_workflows.py's streams_text: one local step that streams. */
async function nodeStreams(ctx, input) {
  return ctx.step('write', (info) => nodeWrite(input, info), { retry: streamRetry });
}

// tests/e2e/model_workflows.py's prices: 2.50 and 10.00 per million input and output tokens.
const MODEL_PRICES = { inputMicrosPerMillion: 2_500_000, outputMicrosPerMillion: 10_000_000 };

/** A model call (ctx.modelCall) answered on `input.queue`; its text and the usage reported. */
async function nodeModel(ctx, input) {
  const response = await ctx.modelCall({
    model: 'offline-chat-1',
    messages: [{ role: 'user', content: input.question }],
    maxTokens: 40,
    prices: MODEL_PRICES,
    taskQueue: input.queue,
  });
  return { text: modelText(response), usage: response.usage, model: response.model };
}

// An OpenAI-compatible client answering offline: usage counts words, as the Python examples' do.
const offlineModel = {
  chat: {
    completions: {
      create: ({ model, messages, max_tokens: maxTokens }) => {
        const words = ['Fences', 'stop', 'stale', 'writers', 'from', 'the', 'past', 'lease.'].slice(0, maxTokens);
        const prompt = messages.map((m) => `${m.role}: ${m.content}`).join('\n');
        const promptTokens = prompt.split(/\s+/).filter(Boolean).length;
        return {
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: words.join(' ') }, finish_reason: 'stop' }],
          usage: { prompt_tokens: promptTokens, completion_tokens: words.length, total_tokens: promptTokens + words.length },
        };
      },
    },
  },
};

const steps = {
  model_call: modelStep(offlineModel, MODEL_PRICES),
  node_write: nodeWrite,
  crash: () => process.exit(70), // as an OOM kill or a segfault would
  notify: (input, info) => {
    ledger('notify', info);
    return { delivered: true, by: 'node', message: input?.message ?? null };
  },
  flaky: (input, info) => {
    ledger('flaky', info);
    if (info.attempt <= (input?.fail_times ?? 0)) {
      const error = new Error(`flaky failure on attempt ${info.attempt}`);
      error.name = 'FlakyError';
      throw error;
    }
    return { attempts: info.attempt };
  },
  gated: async (input, info) => {
    ledger('gated', info);
    await waitForFile(input.gate, () => info.heartbeat());
    return { by: identity };
  },
  square: async (input, info) => {
    ledger('square', info);
    if (input?.stall_on === identity) await new Promise(() => {}); // until the process dies
    await pause(input?.delay_ms ?? 0);
    return input.n * input.n;
  },
};

/** The input through a step's output into state "echoed"; the signal "value" as the result. */
/** tests/e2e/paged_workflows.py's paged_replay, step for step: every wake-up replays the
 * journal through pages and payload references. */
async function pagedReplay(ctx, input) {
  const part = (index) => `${index}:`.padEnd(index % 2 === 0 ? input.size : 20, String.fromCharCode(97 + (index % 26)));
  const parts = [];
  for (let index = 0; index < input.count; index++) parts.push(await ctx.step(`part_${index}`, () => part(index)));
  await ctx.setState('parts', parts.length);
  const message = await ctx.waitForSignal('go');
  await ctx.sleep(1.0);
  return {
    parts: parts.map((text) => createHash('sha256').update(text).digest('hex').slice(0, 12)),
    sizes: parts.map((text) => text.length),
    message,
  };
}

async function echoPayloads(ctx, value) {
  const echoed = await ctx.step('echo', () => value);
  await ctx.setState('echoed', echoed);
  const signalled = await ctx.waitForSignal('value');
  await ctx.setState('signalled', signalled);
  return signalled;
}

/** A chat: one `say` signal and one `reply` step per turn. Outside its steps it appends a line
 * (`<identity> <point>`) to `input.passes` at each point it passes, so a test sees how often
 * the code ran each point: once when each wake-up resumes the run kept by the worker (sticky
 * execution), again on a replay. */
async function nodeChat(ctx, input) {
  const pass = (point) => fs.appendFileSync(input.passes, `${identity} ${point}\n`);
  pass('start');
  const replies = [];
  for (let turn = 0; turn < input.turns; turn++) {
    const said = await ctx.waitForSignal('say');
    pass(`turn ${turn}`);
    replies.push(
      await ctx.step('reply', (info) => {
        ledger('reply', info);
        return `${turn}: ${said}`;
      }),
    );
  }
  return replies;
}

// tests/e2e/chain_workflows.py's chain_turns: one signal "msg" per turn until `total` are
// seen, continuing as new after `every` turns in a run.
async function chainTurns(ctx, state) {
  const seen = [...state.seen];
  const lengths = [...state.lengths];
  let turn = 0;
  while (seen.length < state.total) {
    if (turn === state.every) {
      lengths.push(ctx.info.historyLength);
      await ctx.continueAsNew({ ...state, seen, lengths });
    }
    seen.push(await ctx.waitForSignal('msg'));
    turn += 1;
  }
  return { seen, lengths, run_id: ctx.info.runId, run: ctx.info.runNumber };
}

// tests/e2e/patch_workflows_v1.py, _v2.py and _v3.py's release, as deployed in RELEASE_CODE.
const RELEASE_CODE = process.env.RELEASE_CODE ?? 'v1';
async function release(ctx) {
  let prepared;
  if (RELEASE_CODE === 'v3') ctx.deprecatePatch('prepare-v2');
  if (RELEASE_CODE === 'v3' || (RELEASE_CODE === 'v2' && ctx.patched('prepare-v2'))) {
    prepared = await ctx.step('prepare_v2', () => 'v2');
  } else {
    prepared = await ctx.step('prepare', () => 'v1');
  }
  await ctx.waitForSignal('go');
  const finished = RELEASE_CODE !== 'v1' && ctx.patched('finish-v2') ? await ctx.step('finish_v2', () => 'v2') : await ctx.step('finish', () => 'v1');
  return { prepare: prepared, finish: finished };
}

// tests/e2e/approval_workflows.py's ask: ctx.approval with the input's settings; on escalation
// it publishes state "escalated"; returns the decision, or the expiry.
async function nodeAsk(ctx, input) {
  try {
    const decision = await ctx.approval(input.name ?? 'deploy', input.details, {
      timeout: input.timeout,
      escalateAfter: input.escalate_after ?? null,
      approvers: input.approvers ?? [],
      escalateTo: input.escalate_to ?? [],
      onEscalated: async (escalation) =>
        ctx.setState('escalated', { approval_id: escalation.approvalId, escalate_to: escalation.escalateTo }),
    });
    return {
      approved: decision.approved,
      approval_id: decision.approvalId,
      decided_by: decision.decidedBy,
      reason: decision.reason,
      decided_at: decision.decidedAt.toISOString(),
      escalated: decision.escalated,
    };
  } catch (error) {
    if (!(error instanceof ApprovalExpiredError)) throw error;
    return { expired: true, approval_id: error.approvalId, expires_at: error.expiresAt, expired_at: error.expiredAt };
  }
}

/** Runs tests/e2e/child_workflows.py's `adder` as a child on `input.queue` (a Python worker's),
 * then its `failing_child`, whose ChildWorkflowFailedError it reports. */
async function nodeParent(ctx, input) {
  const handle = await ctx.startChild('adder', { a: 4, b: 5 }, { taskQueue: input.queue });
  const total = await handle.result();
  let failed = null;
  try {
    await ctx.child('failing_child', { what: 'node' }, { taskQueue: input.queue, id: `${handle.workflowId}-failing` });
  } catch (error) {
    if (!(error instanceof ChildWorkflowFailedError)) throw error;
    failed = { type: error.errorType, status: error.status, child: error.workflowId };
  }
  return { total, child: handle.workflowId, run: handle.runId, failed };
}

const worker = new Worker({
  ...(args.cells ? { cells: parseCells(args.cells) } : { scheduler: args.scheduler, history: args.history }),
  taskQueue: args['task-queue'],
  identity,
  concurrency: Number(args.concurrency),
  shutdownGraceMs: Number(args['shutdown-grace-ms']),
  workflows: {
    chain_turns: chainTurns,
    node_order: nodeOrder,
    clock_reading: clockReading,
    cancel_path_switch: cancelPathSwitch,
    node_long: nodeLong,
    node_limits: nodeLimits,
    node_gated: nodeGated,
    node_bulky: nodeBulky,
    echo_payloads: echoPayloads,
    paged_replay: pagedReplay,
    node_chat: nodeChat,
    node_streams: nodeStreams,
    node_model: nodeModel,
    release,
    ...sagaWorkflows(ledger),
    node_ask: nodeAsk,
    node_parent: nodeParent,
  },
  steps,
  onConnected: () => process.stdout.write(`node worker ${identity} connected\n`),
});

let signals = 0;
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    signals += 1;
    if (signals > 1) process.exit(1);
    worker.stop();
  });
}

await worker.run();
process.exit(0);
