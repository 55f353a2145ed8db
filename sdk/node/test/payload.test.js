import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadProtos } from '../src/proto.js';
import { failureFrom, fromDuration, fromValue, timestampMs, toDuration, toTimestamp, toValue } from '../src/payload.js';

const samples = [
  null,
  true,
  false,
  0,
  -1.5,
  3,
  2 ** 53,
  '',
  'héllo',
  [],
  {},
  [1, 'two', null, false, [3, [4]], { five: 5 }],
  { a: { b: { c: [null, { d: true }] } }, e: 1e-7, f: 'x' },
];

test('JSON values survive a round trip through google.protobuf.Value', () => {
  for (const sample of samples) assert.deepEqual(fromValue(toValue(sample)), sample);
});

test('values survive the wire (serialized and parsed by the loaded protos)', () => {
  const { definition } = loadProtos();
  const method = definition['perdure.api.worker.v1.JournalService'].RecordStep;
  for (const sample of samples) {
    const wire = method.requestSerialize({ workflow_id: 'w', fence: 1, output: toValue(sample) });
    assert.deepEqual(fromValue(method.requestDeserialize(wire).output), sample);
  }
});

test('undefined and toJSON follow JSON.stringify', () => {
  assert.deepEqual(fromValue(toValue(undefined)), null);
  assert.deepEqual(fromValue(toValue({ a: undefined, b: 1 })), { b: 1 });
  assert.deepEqual(fromValue(toValue([undefined])), [null]);
  const date = new Date('2026-01-02T03:04:05.000Z');
  assert.equal(fromValue(toValue({ date })).date, '2026-01-02T03:04:05.000Z');
});

test('what is not JSON is refused', () => {
  for (const bad of [NaN, Infinity, -Infinity, 10n, () => 1, Symbol('s'), { a: NaN }]) {
    assert.throws(() => toValue(bad), TypeError);
  }
  const cycle = {};
  cycle.self = cycle;
  assert.throws(() => toValue(cycle), TypeError);
});

test('an unset Value decodes as null', () => {
  assert.equal(fromValue(null), null);
  assert.equal(fromValue(undefined), null);
  assert.equal(fromValue({}), null);
});

test('durations and timestamps', () => {
  assert.deepEqual(toDuration(1.5), { seconds: 1, nanos: 500_000_000 });
  assert.deepEqual(toDuration(0), { seconds: 0, nanos: 0 });
  assert.equal(fromDuration({ seconds: 2, nanos: 250_000_000 }), 2.25);
  assert.equal(fromDuration(null), null);
  const ms = Date.parse('2026-11-30T08:00:00.123Z');
  assert.equal(timestampMs(toTimestamp(ms)), ms);
});

test('failures carry the error name, message and stack', () => {
  class FlakyError extends Error {
    constructor(message) {
      super(message);
      this.name = 'FlakyError';
    }
  }
  const failure = failureFrom(new FlakyError('nope'));
  assert.equal(failure.type, 'FlakyError');
  assert.equal(failure.message, 'nope');
  assert.match(failure.stack_trace, /FlakyError: nope/);
  assert.equal(failureFrom('plain').message, 'plain');
});
