// A worker serving several cells: one session per cell, a cell that is down costing only its own.

import assert from 'node:assert/strict';
import net from 'node:net';
import test from 'node:test';

import { Worker, parseCells } from '../src/index.js';
import { FakeCluster } from './fake-cluster.js';

const order = async () => 'done';

test('PERDURE_CELLS is parsed, and a malformed entry says what to fix', () => {
  assert.deepEqual(parseCells('a=h1:7401/s1:7402; b=ipv4:10.0.0.1:7401,10.0.0.2:7401/s2:7402'), [
    { name: 'a', history: 'h1:7401', scheduler: 's1:7402' },
    { name: 'b', history: 'ipv4:10.0.0.1:7401,10.0.0.2:7401', scheduler: 's2:7402' },
  ]);
  assert.throws(() => parseCells('a=h1:7401'), /name=history_address\/scheduler_address/);
  assert.throws(() => parseCells('a=h1:7401/s1:7402,b=h2:7401/s2:7402'), /separate cells with ';'/);
  assert.throws(() => parseCells(' ; '), /no cells/);
  assert.throws(() => new Worker({ workflows: { order }, cells: /** @type {any} */ ([{ history: 'h' }]) }), /history and a scheduler/);
});

/** A port nobody listens on: a cell that is down. */
async function deadAddress() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(() => resolve(undefined)));
  return `127.0.0.1:${port}`;
}

test('a worker holds a session with every cell, and a cell that is down stops none of the others', { timeout: 30_000 }, async () => {
  const first = new FakeCluster();
  const second = new FakeCluster();
  await first.start();
  await second.start();
  const down = await deadAddress();
  const worker = new Worker({
    logger: null,
    workflows: { order },
    identity: 'cells',
    cells: [
      { history: first.address, scheduler: first.address },
      { history: down, scheduler: down },
      { history: second.address, scheduler: second.address },
    ],
  });
  const running = worker.run();
  try {
    await first.until(() => first.hellos.length === 1, 'a hello in the first cell');
    await second.until(() => second.hellos.length === 1, 'a hello in the second cell');
    for (const hello of [first.hellos[0], second.hellos[0]]) {
      assert.equal(hello.identity, 'cells');
      assert.deepEqual(hello.workflow_types, ['order']);
      assert.equal(hello.build_id, worker.buildId);
    }
  } finally {
    worker.stop();
    await running;
    first.stop();
    second.stop();
  }
});
