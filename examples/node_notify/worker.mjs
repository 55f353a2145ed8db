#!/usr/bin/env node
// A Node.js worker serving the remote step type `notify` on the task queue `node-tools`: the
// research agent (examples/research_agent, input `notify_queue: "node-tools"`) calls it with
// ctx.call("notify", {recipient, subject, message}, task_queue="node-tools").
//
//   node examples/node_notify/worker.mjs [--scheduler localhost:7402] [--history localhost:7401]
//                                        [--task-queue node-tools] [--identity NAME]

import os from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from '../../sdk/node/src/index.js';

const { values: args } = parseArgs({
  options: {
    scheduler: { type: 'string', default: process.env.PERDURE_SCHEDULER_ADDRESS ?? 'localhost:7402' },
    history: { type: 'string', default: process.env.PERDURE_HISTORY_ADDRESS ?? 'localhost:7401' },
    'task-queue': { type: 'string', default: 'node-tools' },
    identity: { type: 'string', default: `node-notify@${os.hostname()}:${process.pid}` },
  },
});

/**
 * The `notify` step: "send" the notification (print it). The idempotency key is the same on
 * every attempt and every replay: a real provider would be given it to drop duplicates.
 * @param {{recipient?: string, subject?: string, message?: string}} input
 * @param {import('../../sdk/node/src/index.js').StepInfo} info
 */
async function notify(input, info) {
  const { recipient = 'ops@example.com', subject = '(no subject)', message = '' } = input ?? {};
  console.log(
    `[notify] ${info.idempotencyKey} (attempt ${info.attempt}, workflow type ${info.workflowType || '?'})\n` +
      `  to:      ${recipient}\n  subject: ${subject}\n  ${String(message).split('\n').join('\n  ')}`,
  );
  return {
    delivered: true,
    by: 'node',
    recipient,
    subject,
    message,
    idempotency_key: info.idempotencyKey,
  };
}

const worker = new Worker({
  scheduler: args.scheduler,
  history: args.history,
  taskQueue: args['task-queue'],
  identity: args.identity,
  steps: { notify },
});

// Stopping is the program's job: drain on the first SIGTERM/SIGINT, exit at once on a second.
let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    worker.stop();
  });
}

await worker.run();
process.exit(0);
