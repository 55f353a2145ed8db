#!/usr/bin/env node
// A Node worker for Python end-to-end tests: the workflows `node_order` and `echo_payloads`
// (tests/e2e/payload_workflows.py's twin), and the remote step
// types `notify`, `flaky`, `gated` and `square` (which never ends on the worker named in its
// input's `stall_on`). Every step execution appends one JSON line to
// the ledger file. Prints "connected" once welcomed; drains on SIGTERM/SIGINT.
//
//   node tests/e2e/node_worker.mjs --scheduler HOST:PORT --history HOST:PORT --task-queue Q \
//     --identity ID --concurrency N --ledger FILE

import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { Worker } from '../../sdk/node/src/index.js';

const { values: args } = parseArgs({
  options: {
    scheduler: { type: 'string', default: 'localhost:7402' },
    history: { type: 'string', default: 'localhost:7401' },
    'task-queue': { type: 'string', default: 'default' },
    identity: { type: 'string', default: `node:${process.pid}` },
    concurrency: { type: 'string', default: '10' },
    ledger: { type: 'string' },
  },
});
const identity = args.identity;

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

const steps = {
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
async function echoPayloads(ctx, value) {
  const echoed = await ctx.step('echo', () => value);
  await ctx.setState('echoed', echoed);
  const signalled = await ctx.waitForSignal('value');
  await ctx.setState('signalled', signalled);
  return signalled;
}

const worker = new Worker({
  scheduler: args.scheduler,
  history: args.history,
  taskQueue: args['task-queue'],
  identity,
  concurrency: Number(args.concurrency),
  workflows: { node_order: nodeOrder, echo_payloads: echoPayloads },
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
