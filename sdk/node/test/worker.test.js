// The Worker against an in-process fake scheduler (TaskService) and fake history
// (JournalService): the hello, heartbeats of step leases, TaskDone, reconnects, drain.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from '../src/index.js';
import { fromPayload, toPayload, toTimestamp } from '../src/payload.js';
import { FakeCluster } from './fake-cluster.js';

test('a worker says hello, executes a pushed step task, heartbeats its lease and reports TaskDone', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  /** @type {(value?: any) => void} */
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    taskQueue: 'tools',
    identity: 'test-worker',
    concurrency: 3,
    logger: null,
    steps: {
      refund: () => null,
      charge: async (input, info) => {
        await gate;
        return { charged: input.amount, key: info.idempotencyKey };
      },
    },
    workflows: { order: async () => null },
  });
  const running = worker.run();
  try {
    await cluster.until(() => cluster.hellos.length === 1, 'the hello');
    const [hello] = cluster.hellos;
    assert.equal(hello.identity, 'test-worker');
    assert.equal(hello.task_queue, 'tools');
    assert.deepEqual(hello.workflow_types, ['order']);
    assert.deepEqual(hello.step_types, ['charge', 'refund']);
    assert.equal(hello.capacity, 3);
    assert.deepEqual(hello.timer_lookahead, { seconds: 0, nanos: 100_000_000 });
    assert.deepEqual(hello.leases, []);

    cluster.push({ workflow_id: 'wf-1', workflow_type: '', fence: 4, step_id: 'charge', step_type: 'charge' });
    await cluster.until(() => cluster.journalCalls.some(([m]) => m === 'LoadStep'), 'LoadStep');
    const lease = { workflow_id: 'wf-1', fence: 4, step_id: 'charge' };
    await cluster.until(
      () => cluster.messages.some((m) => m.message === 'heartbeat' && m.heartbeat.leases.some((l) => l.step_id === 'charge' && Number(l.fence) === 4)),
      'a heartbeat listing the step lease',
    );
    release();
    await cluster.until(() => cluster.messages.some((m) => m.message === 'task_done'), 'TaskDone');
    const done = cluster.messages.find((m) => m.message === 'task_done').task_done.lease;
    assert.deepEqual({ ...done, fence: Number(done.fence) }, lease);
    const [, record] = cluster.journalCalls.find(([m]) => m === 'RecordStep');
    assert.equal(record.step_task, true);
    assert.equal(record.step_id, 'charge');
    assert.deepEqual(fromPayload(record.output), { charged: 2, key: 'wf-1:charge' });
    // the lease is no longer listed
    const count = cluster.messages.length;
    await cluster.until(() => cluster.messages.slice(count).some((m) => m.message === 'heartbeat'), 'the next heartbeat');
    const last = cluster.messages.filter((m) => m.message === 'heartbeat').at(-1);
    assert.deepEqual(last.heartbeat.leases, []);
  } finally {
    release();
    worker.stop();
    await running;
    cluster.stop();
  }
});

test('a task delivered past its deadline is handed back unstarted, not left to expire', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  let ran = false;
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    taskQueue: 'tools',
    identity: 'late-worker',
    logger: null,
    steps: {
      charge: () => {
        ran = true;
      },
    },
  });
  const running = worker.run();
  try {
    await cluster.until(() => cluster.hellos.length === 1, 'the hello');
    // The welcome's renewal reads the database clock (re-checked at every heartbeat).
    await cluster.until(() => worker._keeper._clock !== null, 'the clock read');
    const expired = toTimestamp(Date.now() - 100); // its lease ended on the way here
    cluster.push({ workflow_id: 'wf-late', fence: 3, step_id: 'charge', step_type: 'charge', lease_expire_time: expired });
    await cluster.until(() => cluster.messages.some((m) => m.message === 'task_done'), 'TaskDone');
    const done = cluster.messages.find((m) => m.message === 'task_done').task_done;
    assert.deepEqual({ ...done.lease, fence: Number(done.lease.fence) }, { workflow_id: 'wf-late', fence: 3, step_id: 'charge' });
    assert.equal(done.unfinished, true);
    assert.equal(ran, false);
    assert.equal(cluster.journalCalls.filter(([m]) => m === 'LoadStep').length, 0);
  } finally {
    worker.stop();
    await running;
    cluster.stop();
  }
});

test('leases still held are sent in the hello after a reconnect; stop() drains', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  /** @type {(value?: any) => void} */
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    taskQueue: 'tools',
    logger: null,
    shutdownGraceMs: 5000,
    steps: { charge: async () => { await gate; return 1; } },
  });
  const running = worker.run();
  try {
    await cluster.until(() => cluster.hellos.length === 1, 'the hello');
    assert.deepEqual(cluster.hellos[0].workflow_types, []);
    cluster.push({ workflow_id: 'wf-2', fence: 9, step_id: 'charge#3', step_type: 'charge' });
    await cluster.until(() => cluster.journalCalls.some(([m]) => m === 'LoadStep'), 'LoadStep');
    cluster.streams[0].end(); // the scheduler ends the stream (as a replica shutting down does)
    await cluster.until(() => cluster.hellos.length === 2, 'a second hello', 3000);
    const leases = cluster.hellos[1].leases.map((l) => ({ ...l, fence: Number(l.fence) }));
    assert.deepEqual(leases, [{ workflow_id: 'wf-2', fence: 9, step_id: 'charge#3' }]);
    worker.stop();
    await cluster.until(() => cluster.messages.some((m) => m.message === 'drain'), 'Drain');
    release();
    await cluster.until(() => cluster.messages.some((m) => m.message === 'task_done'), 'TaskDone after the drain');
  } finally {
    release();
    worker.stop();
    await running;
    cluster.stop();
  }
});

test('a worker keeping runs says so: a sticky id in its hello, TaskDone.sticky for a run it keeps suspended', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  cluster.loadJournal = {
    workflow: { workflow_id: 'wf-1', workflow_type: 'chat', status: 'WORKFLOW_STATUS_RUNNING', input: toPayload(null) },
    events: [{ event_id: 1, event_type: 'EVENT_TYPE_WORKFLOW_STARTED' }],
    now: { seconds: 1_800_000_000 },
  };
  const workers = [true, false].map(
    (keeps) =>
      new Worker({
        scheduler: cluster.address,
        history: cluster.address,
        logger: null,
        cacheSize: keeps ? 10 : 0,
        workflows: { chat: (ctx) => ctx.waitForSignal('say') },
      }),
  );
  const running = [];
  try {
    for (const [index, worker] of workers.entries()) {
      running.push(worker.run());
      await cluster.until(() => cluster.hellos.length === index + 1, 'the hello');
      cluster.push({ workflow_id: 'wf-1', workflow_type: 'chat', fence: index + 1 });
      await cluster.until(() => cluster.messages.filter((m) => m.message === 'task_done').length === index + 1, 'TaskDone');
    }
    const [kept, plain] = cluster.messages.filter((m) => m.message === 'task_done').map((m) => m.task_done);
    assert.match(cluster.hellos[0].sticky_id, /^[0-9a-f-]{36}$/);
    assert.equal(kept.sticky, true);
    assert.equal(workers[0].cacheStats.runs, 1);
    assert.equal(cluster.hellos[1].sticky_id, '');
    assert.equal(plain.sticky, false);
    assert.deepEqual(cluster.journalCalls.filter(([m]) => m === 'SuspendWorkflow').length, 2);
  } finally {
    for (const worker of workers) worker.stop();
    await Promise.all(running);
    cluster.stop();
  }
  assert.equal(workers[0].cacheStats.runs, 0); // stopping let the kept run go
  assert.equal(workers[0].cacheStats.evictions, 1);
});

test('cache bounds from the environment must be whole numbers', () => {
  process.env.PERDURE_WORKER_CACHE_SIZE = 'lots';
  try {
    assert.throws(() => new Worker({ steps: { x: () => 1 } }), /PERDURE_WORKER_CACHE_SIZE must be a whole number/);
  } finally {
    delete process.env.PERDURE_WORKER_CACHE_SIZE;
  }
  assert.throws(() => new Worker({ steps: { x: () => 1 }, cacheBytes: 0 }), /cacheBytes must be an integer > 0/);
  assert.equal(new Worker({ steps: { x: () => 1 } }).cacheStats.runs, 0);
});

test('a worker with neither workflows nor steps is refused', () => {
  assert.throws(() => new Worker({ logger: null }), TypeError);
  assert.throws(() => new Worker({ steps: { $x: () => 1 } }), TypeError);
  assert.throws(() => new Worker({ steps: { x: () => 1 }, concurrency: 0 }), RangeError);
});

test('a worker stopped before its welcome arrives ends, and renews nothing after', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    logger: null,
    workflows: { order: async (ctx) => ctx.step('charge', () => 1) },
  });
  try {
    const running = worker.run();
    worker.stop(); // before the hello is even sent: the welcome comes after the goodbye
    await running;
    assert.equal(cluster.hellos.length, 1);
    assert.equal(worker._keeper._renewTimer, null); // no timer keeps the process alive
  } finally {
    cluster.stop();
  }
});
