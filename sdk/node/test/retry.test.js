import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RetryPolicy, NO_RETRY } from '../src/retry.js';

test('defaults match the Python SDK', () => {
  const policy = new RetryPolicy();
  assert.equal(policy.initialInterval, 1);
  assert.equal(policy.backoffCoefficient, 2);
  assert.equal(policy.maximumInterval, 60);
  assert.equal(policy.maximumAttempts, 5);
  assert.deepEqual([...policy.nonRetryableErrorTypes], []);
});

test('delay(n) = min(initial * coefficient^(n-1), maximum)', () => {
  const policy = new RetryPolicy();
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => policy.delay(n)), [1, 2, 4, 8, 16, 32, 60, 60]);
  assert.equal(policy.delay(5000), 60);
  const custom = new RetryPolicy({ initialInterval: 0.5, backoffCoefficient: 3, maximumInterval: 10 });
  assert.deepEqual([1, 2, 3, 4].map((n) => custom.delay(n)), [0.5, 1.5, 4.5, 10]);
});

test('attempts are retried until maximumAttempts, unless the error is not retryable', () => {
  const policy = new RetryPolicy({ maximumAttempts: 3, nonRetryableErrorTypes: ['ValidationError'] });
  const error = new Error('x');
  assert.equal(policy.retries(error, 1), true);
  assert.equal(policy.retries(error, 2), true);
  assert.equal(policy.retries(error, 3), false);
  const named = Object.assign(new Error('bad'), { name: 'ValidationError' });
  assert.equal(policy.retries(named, 1), false);
  class BaseProblem extends Error {}
  class Derived extends BaseProblem {}
  const byClass = new RetryPolicy({ nonRetryableErrorTypes: ['BaseProblem'] });
  assert.equal(byClass.retries(new Derived('x'), 1), false);
  assert.equal(new RetryPolicy({ maximumAttempts: 0 }).retries(error, 10_000), true);
  assert.equal(NO_RETRY.retries(error, 1), false);
});

test('invalid policies are refused', () => {
  assert.throws(() => new RetryPolicy({ initialInterval: -1 }), RangeError);
  assert.throws(() => new RetryPolicy({ backoffCoefficient: 0.5 }), RangeError);
  assert.throws(() => new RetryPolicy({ maximumAttempts: -1 }), RangeError);
  assert.throws(() => new RetryPolicy({ nonRetryableErrorTypes: /** @type {any} */ ('Error') }), TypeError);
});

test('the proto form round-trips', () => {
  const policy = new RetryPolicy({ initialInterval: 0.25, backoffCoefficient: 1.5, maximumInterval: 7, maximumAttempts: 4, nonRetryableErrorTypes: ['X'] });
  const proto = policy.toProto();
  assert.deepEqual(proto.initial_interval, { seconds: 0, nanos: 250_000_000 });
  assert.deepEqual(RetryPolicy.fromProto(proto), policy);
  assert.deepEqual(RetryPolicy.fromProto(null), new RetryPolicy());
});
