import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Frames, MAX_BUFFERED_CHUNKS, StreamBufferFullError } from '../src/frames.js';
import { JournalRejectedError, JournalUnavailableError, LeaseLostError, PerdureError } from '../src/errors.js';
import { StepInfo } from '../src/step-info.js';
import { execute } from '../src/runner.js';
import { RetryPolicy } from '../src/retry.js';
import { FakeJournal, JournalBuilder, context } from './helpers.js';

const text = (payload) => JSON.parse(Buffer.from(payload.data).toString('utf8'));

/** A send whose answers the test releases one at a time; it records every request. */
function gatedSend() {
  const requests = [];
  const gates = [];
  const send = (request) =>
    new Promise((resolve, reject) => {
      requests.push({ ...request, chunks: request.chunks.map(text) });
      gates.push({ resolve, reject });
    });
  const answer = async (error = null) => {
    while (!gates.length) await new Promise((resolve) => setImmediate(resolve));
    const gate = gates.shift();
    if (error) gate.reject(error);
    else gate.resolve({ last_seq: 0 });
  };
  return { send, requests, answer };
}

test('the first chunk leaves at once; chunks emitted while a batch is in flight go in the next one, numbered on', async () => {
  const { send, requests, answer } = gatedSend();
  const frames = new Frames(send, { stepId: 'write', attempt: 2 });
  frames.emit('a');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(requests.length, 1);
  for (const chunk of ['b', 'c', 'd']) frames.emit(chunk);
  frames.emit({ done: true }, 'events');
  await answer();
  const flushed = frames.flush();
  await answer();
  await answer();
  await flushed;
  const output = requests.filter((request) => request.stream === 'output');
  assert.deepEqual(
    output.map((request) => [request.first_index, request.chunks]),
    [
      [0, ['a']],
      [1, ['b', 'c', 'd']],
    ],
  );
  const events = requests.find((request) => request.stream === 'events');
  assert.deepEqual([events.first_index, events.chunks, events.step_id, events.attempt], [0, [{ done: true }], 'write', 2]);
  assert.throws(() => frames.emit('late'), PerdureError);
});

test('a batch history could not be reached for is sent again with the same first_index', async () => {
  const { send, requests, answer } = gatedSend();
  const frames = new Frames(send, { stepId: 's', attempt: 1 });
  frames.emit('x');
  frames.emit('y');
  await answer(new JournalUnavailableError('history is down'));
  await answer();
  await frames.flush();
  assert.deepEqual(
    requests.map((request) => [request.first_index, request.chunks]),
    [
      [0, ['x', 'y']],
      [0, ['x', 'y']],
    ],
  );
});

test('a fenced-out attempt sends nothing more and flushes quietly; a refused batch fails flush', async () => {
  const { send, requests, answer } = gatedSend();
  const frames = new Frames(send, { stepId: 's', attempt: 1 });
  frames.emit('x');
  await answer(new LeaseLostError('STALE_FENCE'));
  frames.emit('y');
  await frames.flush();
  assert.equal(requests.length, 1);

  const refused = gatedSend();
  const invalid = new Frames(refused.send, { stepId: 's', attempt: 1 });
  invalid.emit('x');
  await refused.answer(new JournalRejectedError('INVALID_ARGUMENT: no'));
  await assert.rejects(invalid.flush(), JournalRejectedError);
});

test('chunks are validated, and the buffer is bounded', async () => {
  const { send } = gatedSend();
  const frames = new Frames(send, { stepId: 's', attempt: 1 });
  assert.throws(() => frames.emit(Number.NaN), TypeError);
  assert.throws(() => frames.emit(Buffer.from('x')), TypeError);
  assert.throws(() => frames.emit('x', ''), TypeError);
  assert.throws(() => frames.emit('x', 'a\nb'), RangeError);
  assert.throws(() => frames.emit('x', 's'.repeat(201)), RangeError);
  for (let i = 0; i < MAX_BUFFERED_CHUNKS; i++) frames.emit(i);
  assert.throws(() => frames.emit('one too many'), StreamBufferFullError);
});

test("a step's frames are stored before its outcome, completed or failed", async () => {
  const journal = new FakeJournal();
  const retry = new RetryPolicy({ initialInterval: 0.1, maximumAttempts: 1 });
  const outcome = await execute(async (c) => {
    const text = await c.step('write', async (info) => {
      for (const word of ['a', 'b', 'c']) {
        info.emit(word);
        await new Promise((resolve) => setImmediate(resolve));
      }
      info.emit({ tokens: 3 }, 'usage');
      return 'abc';
    });
    try {
      await c.step('broken', (info) => {
        info.emit('partial');
        throw new Error('the model went away');
      }, { retry });
    } catch {
      // failed for good: its frames were stored first
    }
    return text;
  }, context(new JournalBuilder(), journal), null);
  assert.equal(outcome.kind, 'result');
  const calls = journal.calls.map(([method, request]) => [method, request.step_id, request.stream ?? null, (request.chunks ?? []).map(text)]);
  const record = (stepId) => calls.findIndex(([method, id]) => method === 'RecordStep' && id === stepId);
  const emits = (stepId) => calls.filter(([method, id]) => method === 'EmitFrames' && id === stepId);
  assert.deepEqual(emits('write').filter(([, , stream]) => stream === 'output').flatMap(([, , , chunks]) => chunks), ['a', 'b', 'c']);
  assert.deepEqual(emits('write').filter(([, , stream]) => stream === 'usage').flatMap(([, , , chunks]) => chunks), [{ tokens: 3 }]);
  assert.ok(calls.findLastIndex(([method, id]) => method === 'EmitFrames' && id === 'write') < record('write'));
  assert.deepEqual(emits('broken').flatMap(([, , , chunks]) => chunks), ['partial']);
  assert.ok(calls.findIndex(([method, id]) => method === 'EmitFrames' && id === 'broken') < record('broken'));
  assert.equal(journal.calls[record('broken')][1].failure.message, 'the model went away');
});

test('StepInfo.emit outside a running attempt is refused', () => {
  const info = new StepInfo({ workflowId: 'w', stepId: 's', attempt: 1, fence: 1, onHeartbeat: () => {} });
  assert.throws(() => info.emit('x'), /only available inside its running attempt/);
});
