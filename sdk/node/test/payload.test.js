import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadProtos } from '../src/proto.js';
import { failureFrom, fromDuration, fromPayload, timestampMs, toDuration, toTimestamp, toPayload } from '../src/payload.js';

const samples = [
  null,
  true,
  false,
  0,
  -1.5,
  3,
  2 ** 53 - 1,
  2n ** 64n + 1n,
  -(2n ** 53n) - 1n,
  1.5e300,
  '',
  'héllo',
  [],
  {},
  [1, 'two', null, false, [3, [4]], { five: 5 }],
  { a: { b: { c: [null, { d: true }] } }, e: 1e-7, f: 'x' },
];

test('values survive a round trip through a Payload, big integers as BigInt', () => {
  for (const sample of samples) assert.deepEqual(fromPayload(toPayload(sample)), sample);
});

test('values survive the wire (serialized and parsed by the loaded protos)', () => {
  const { definition } = loadProtos();
  const method = definition['perdure.api.worker.v1.JournalService'].RecordStep;
  for (const sample of samples) {
    const wire = method.requestSerialize({ workflow_id: 'w', fence: 1, output: toPayload(sample) });
    assert.deepEqual(fromPayload(method.requestDeserialize(wire).output), sample);
  }
});

test('undefined and toJSON follow JSON.stringify', () => {
  assert.deepEqual(fromPayload(toPayload(undefined)), null);
  assert.deepEqual(fromPayload(toPayload({ a: undefined, b: 1 })), { b: 1 });
  assert.deepEqual(fromPayload(toPayload([undefined])), [null]);
  const date = new Date('2026-01-02T03:04:05.000Z');
  assert.equal(fromPayload(toPayload({ date })).date, '2026-01-02T03:04:05.000Z');
});

test('what is not JSON is refused', () => {
  for (const bad of [NaN, Infinity, -Infinity, () => 1, Symbol('s'), { a: NaN }, { raw: Buffer.from('x') }]) {
    assert.throws(() => toPayload(bad), TypeError);
  }
  const cycle = {};
  cycle.self = cycle;
  assert.throws(() => toPayload(cycle), TypeError);
});

test('an unset Payload decodes as null', () => {
  assert.equal(fromPayload(null), null);
  assert.equal(fromPayload(undefined), null);
  assert.equal(fromPayload(/** @type {any} */ ({})), null);
  assert.equal(fromPayload({ encoding: '', data: Buffer.alloc(0) }), null);
});

test('bytes travel as binary/plain and come back as a Buffer', () => {
  const payload = toPayload(new Uint8Array([0, 1, 255]));
  assert.equal(payload.encoding, 'binary/plain');
  assert.deepEqual(fromPayload(payload), Buffer.from([0, 1, 255]));
  assert.ok(Buffer.isBuffer(fromPayload(toPayload(Buffer.alloc(0)))));
});

test('JSON from other languages reads exactly: whole floats as numbers, big integers as BigInt', () => {
  const text = ' {"int": 18446744073709551617, "float": 1.0, "neg": -9007199254740993, "e": 1E2, "s": "\\u00e9\\n"} ';
  const value = fromPayload({ encoding: 'json/plain', data: Buffer.from(text) });
  assert.deepEqual(value, { int: 18446744073709551617n, float: 1, neg: -9007199254740993n, e: 100, s: 'é\n' });
  assert.equal(toPayload(value).data.toString(), '{"int":18446744073709551617,"float":1,"neg":-9007199254740993,"e":100,"s":"é\\n"}');
  for (const bad of ['{', '[1,]', '1 2', "'x'", '{"a" 1}', 'NaN', '01']) {
    assert.throws(() => fromPayload({ encoding: 'json/plain', data: Buffer.from(bad) }), SyntaxError, bad);
  }
  assert.throws(() => fromPayload({ encoding: 'text/yaml', data: Buffer.from('a') }), TypeError);
});

test('a key named __proto__ is an ordinary key', () => {
  const value = fromPayload({ encoding: 'json/plain', data: Buffer.from('{"__proto__": {"polluted": 1}}') });
  assert.deepEqual(Object.keys(value), ['__proto__']);
  assert.equal({}.polluted, undefined);
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
