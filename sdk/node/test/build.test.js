// Build ids: the operator's, or derived from the registered functions' source; sent in the
// hello, and with every LoadJournal (a run's first load records it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildIdOf, derivedBuildId, Worker } from '../src/index.js';
import { FakeCluster } from './fake-cluster.js';

const order = async (ctx) => ctx.step('charge', () => 1);
const reordered = async (ctx) => ctx.step('refund', () => 1);

test('a derived build id is 12 hex digits that change with the code and nothing else', () => {
  const id = derivedBuildId(new Map([['workflow:order', order]]));
  assert.match(id, /^[0-9a-f]{12}$/);
  assert.equal(derivedBuildId(new Map([['workflow:order', order]])), id);
  assert.notEqual(derivedBuildId(new Map([['workflow:order', reordered]])), id);
  assert.notEqual(derivedBuildId(new Map([['workflow:other', order]])), id);
});

test('an explicit build id wins over PERDURE_BUILD_ID, which wins over the derived one', () => {
  const functions = new Map([['workflow:order', order]]);
  const saved = process.env.PERDURE_BUILD_ID;
  try {
    process.env.PERDURE_BUILD_ID = 'from-env';
    assert.equal(buildIdOf('v2', functions), 'v2');
    assert.equal(buildIdOf(undefined, functions), 'from-env');
    delete process.env.PERDURE_BUILD_ID;
    assert.equal(buildIdOf(undefined, functions), derivedBuildId(functions));
    for (const bad of ['x'.repeat(65), 'a\nb', ' padded']) {
      assert.throws(() => buildIdOf(bad, functions), /at most 64 printable characters/);
    }
  } finally {
    if (saved === undefined) delete process.env.PERDURE_BUILD_ID;
    else process.env.PERDURE_BUILD_ID = saved;
  }
});

test('the worker sends its build id in the hello and with its loads', { timeout: 20_000 }, async () => {
  const cluster = new FakeCluster();
  await cluster.start();
  /** @type {(value?: any) => void} */
  let connected;
  const welcomed = new Promise((resolve) => {
    connected = resolve;
  });
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    logger: null,
    workflows: { order },
    onConnected: () => connected(),
  });
  const running = worker.run();
  try {
    await welcomed;
    assert.equal(cluster.hellos.length, 1);
    assert.match(cluster.hellos[0].build_id, /^[0-9a-f]{12}$/);
    assert.equal(cluster.hellos[0].build_id, worker.buildId);
    assert.equal(worker._journal.buildId, worker.buildId); // every LoadJournal carries it
  } finally {
    worker.stop();
    await running;
    cluster.stop();
  }
});
