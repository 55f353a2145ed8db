// Every error the SDK defines is a PerdureError (and still an Error, under its own name).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as sdk from '../src/index.js';
import * as errors from '../src/errors.js';
import { LeaseFencedError } from '../src/leases.js';

test('every error class the SDK defines or exports extends PerdureError and keeps its name', () => {
  /** @type {any[]} */
  const classes = [...Object.values(errors), ...Object.values(sdk), LeaseFencedError].filter(
    (value) => typeof value === 'function' && value.prototype instanceof Error,
  );
  assert.ok(classes.length >= 13, classes.map((c) => c.name).join(', '));
  for (const ErrorClass of new Set(classes)) {
    const stepFailure = ErrorClass === errors.StepFailedError || ErrorClass.prototype instanceof errors.StepFailedError;
    const error = stepFailure ? new ErrorClass('s', { type: 'T', message: 'm' }) : new ErrorClass('m');
    assert.ok(error instanceof sdk.PerdureError, `${ErrorClass.name} is a PerdureError`);
    assert.ok(error instanceof Error);
    assert.equal(error.name, ErrorClass.name);
  }
  assert.ok(new sdk.PerdureError('m') instanceof Error);
});

test('the journal errors the SDK classifies are PerdureErrors', () => {
  const lost = errors.classifyJournalError(new errors.JournalCallError('FAILED_PRECONDITION', 'fenced', 'STALE_FENCE'));
  assert.ok(lost instanceof errors.LeaseLostError && lost instanceof sdk.PerdureError);
  const other = errors.classifyJournalError(new TypeError('x'));
  assert.ok(other instanceof errors.JournalUnavailableError && other instanceof sdk.PerdureError);
});
