// The journal client against an in-process JournalService whose Session stream the test
// scripts: calls multiplexed by id, errors as a unary call's, resends after a broken stream,
// a call too large failing alone, streams moving on with age.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import { JournalClient, MAX_ITEM_BYTES } from '../src/journal.js';
import { JournalCallError } from '../src/errors.js';
import { loadProtos } from '../src/proto.js';

/** A history whose Session streams hand each message to `onMessage(stream, message)`. */
async function fakeHistory(onMessage) {
  const { JournalService } = loadProtos();
  const server = new grpc.Server();
  const history = { streams: [], messages: [], ended: [], server, address: '' };
  server.addService(JournalService.service, {
    Session: (stream) => {
      history.streams.push(stream);
      stream.on('data', (message) => {
        history.messages.push({ stream: history.streams.indexOf(stream), calls: message.calls });
        onMessage(stream, message);
      });
      stream.on('end', () => {
        history.ended.push(history.streams.indexOf(stream));
        stream.end();
      });
      stream.on('error', () => {});
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  history.address = `127.0.0.1:${port}`;
  return history;
}

const ok = (call) => ({ id: call.id, [call.call]: call.call === 'start_timer' ? { fire_time: { seconds: 5, nanos: 0 } } : {} });

test('calls made together go in one message on one stream, and each gets its own answer by id', async () => {
  const history = await fakeHistory((stream, message) => stream.write({ answers: [...message.calls].reverse().map(ok) }));
  const client = new JournalClient(history.address);
  try {
    const [timer, state] = await Promise.all([
      client.call('StartTimer', { workflow_id: 'w', fence: 1, step_id: '$sleep' }),
      client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' }),
    ]);
    assert.equal(Number(timer.fire_time.seconds), 5);
    assert.ok(state);
    assert.equal(history.streams.length, 1);
    assert.deepEqual(history.messages[0].calls.map((c) => c.call), ['start_timer', 'set_state']);
    assert.equal(history.messages[0].calls[0].start_timer.step_id, '$sleep');
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test("a SessionError fails that call with the unary call's status and reason", async () => {
  const history = await fakeHistory((stream, message) =>
    stream.write({
      answers: message.calls.map((call) => ({ id: call.id, error: { code: grpc.status.FAILED_PRECONDITION, message: 'fenced', reason: 'STALE_FENCE' } })),
    }),
  );
  const client = new JournalClient(history.address);
  try {
    await assert.rejects(client.call('RecordStep', { workflow_id: 'w', fence: 1 }), (error) => {
      assert.ok(error instanceof JournalCallError);
      assert.deepEqual([error.code, error.reason, error.detail], ['FAILED_PRECONDITION', 'STALE_FENCE', 'fenced']);
      return true;
    });
    assert.equal(history.messages.length, 1); // a refusal is the call's answer: sent once
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test('a call cut off by a broken stream is sent again, with a new id, on a new stream', async () => {
  const history = await fakeHistory((stream, message) => {
    if (history.streams.length === 1) stream.emit('error', { code: grpc.status.UNAVAILABLE, details: 'cut' }); // the first stream breaks
    else stream.write({ answers: message.calls.map(ok) });
  });
  const client = new JournalClient(history.address);
  try {
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' });
    assert.equal(history.streams.length, 2);
    const ids = history.messages.map((m) => Number(m.calls[0].id));
    assert.equal(new Set(ids).size, ids.length);
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

const passingFailure = (call) => ({
  id: call.id,
  error: { code: grpc.status.UNAVAILABLE, message: 'the database failed this call for a passing reason (terminated); call again', reason: '' },
});

test('a call history answers UNAVAILABLE (its database failed it for a passing reason) is sent again', async () => {
  let sent = 0;
  const history = await fakeHistory((stream, message) => {
    sent += message.calls.length;
    stream.write({ answers: message.calls.map((call) => (sent <= 2 ? passingFailure(call) : ok(call))) });
  });
  const client = new JournalClient(history.address);
  try {
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' });
    assert.equal(sent, 3); // idempotent: the run is not given up to its lease's expiry
    assert.equal(history.streams.length, 1);
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test('a call answered UNAVAILABLE every time fails as UNAVAILABLE after 5 sends', async () => {
  let sent = 0;
  const history = await fakeHistory((stream, message) => {
    sent += message.calls.length;
    stream.write({ answers: message.calls.map(passingFailure) });
  });
  const client = new JournalClient(history.address);
  try {
    await assert.rejects(client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' }), (error) => {
      assert.ok(error instanceof JournalCallError);
      assert.equal(error.code, 'UNAVAILABLE');
      return true;
    });
    assert.equal(sent, 5);
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test('a call too large for a message fails alone; the stream carries the others on', async () => {
  const history = await fakeHistory((stream, message) => stream.write({ answers: message.calls.map(ok) }));
  const client = new JournalClient(history.address);
  try {
    const huge = { workflow_id: 'w', fence: 1, key: 'k', value: { encoding: 'binary/plain', data: Buffer.alloc(MAX_ITEM_BYTES) } };
    await assert.rejects(client.call('SetState', huge), (/** @type {any} */ error) => error.code === 'RESOURCE_EXHAUSTED' && error.reason === 'MESSAGE_TOO_LARGE');
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' });
    assert.equal(history.streams.length, 1);
    assert.equal(history.messages.length, 1);
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test('past its age a stream takes no new calls: they go on a new one, and the old one is half-closed', async () => {
  const history = await fakeHistory((stream, message) => stream.write({ answers: message.calls.map(ok) }));
  const client = new JournalClient(history.address, undefined, { maxAgeMs: 0 });
  try {
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'a' });
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'b' });
    assert.equal(history.streams.length, 2);
    const deadline = Date.now() + 5000;
    while (!history.ended.includes(0) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(history.ended.includes(0), 'the first stream was half-closed');
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});

test('a call not answered by its deadline fails as DEADLINE_EXCEEDED, and is not sent again after it', async () => {
  // History never answers "late"; the first stream breaks at "break", which the client then
  // sends again on a new stream: "late", past its deadline, must not go with it.
  const history = await fakeHistory((stream, message) => {
    const keys = message.calls.map((call) => call.set_state?.key);
    if (keys.includes('break') && history.streams.indexOf(stream) === 0) stream.emit('error', { code: grpc.status.UNAVAILABLE, details: 'cut' });
    else stream.write({ answers: message.calls.filter((call) => call.set_state?.key !== 'late').map(ok) });
  });
  const client = new JournalClient(history.address);
  const late = () => history.messages.filter((m) => m.calls.some((call) => call.set_state?.key === 'late'));
  try {
    await assert.rejects(client.call('SetState', { workflow_id: 'w', fence: 1, key: 'late' }, { timeoutMs: 200 }), (/** @type {any} */ error) => error.code === 'DEADLINE_EXCEEDED');
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'break' });
    assert.equal(history.streams.length, 2);
    assert.equal(late().length, 1);
    assert.deepEqual(late().map((m) => m.stream), [0]);
  } finally {
    client.close();
    history.server.forceShutdown();
  }
});
