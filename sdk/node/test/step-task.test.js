// Serving remote steps: runStepTask against a fake journal client.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runStepTask } from '../src/runner.js';
import { JournalCallError, LeaseLostError, JournalUnavailableError } from '../src/errors.js';
import { RetryPolicy } from '../src/retry.js';
import { fromPayload, toPayload, toDuration } from '../src/payload.js';

const log = { info() {}, warn() {}, error() {} };
// A grant as the scheduler sends it, its lease proof opaque to the worker.
const task = { workflow_id: 'wf-9', fence: 3, step_id: 'charge#2', step_type: 'charge', workflow_type: '', lease_proof: Buffer.from('proof') };

class StepJournal {
  constructor(loadStep, { errors = {} } = {}) {
    this.loadStep = loadStep;
    this.calls = [];
    this.errors = errors;
  }

  async call(method, request) {
    this.calls.push([method, structuredClone(request)]);
    await new Promise((resolve) => setImmediate(resolve));
    const error = this.errors[method];
    if (error) {
      if (!Array.isArray(error)) delete this.errors[method];
      else if (error.length) throw error.shift();
      if (!Array.isArray(error)) throw error;
    }
    if (method === 'LoadStep') return this.loadStep;
    if (method === 'RecordStep') return { event_id: 1, retry_time: request.retry_delay ? { seconds: 100, nanos: 0 } : null };
    return {};
  }

  recorded(method) {
    return this.calls.filter(([m]) => m === method).map(([, r]) => r);
  }
}

const loaded = (fields = {}) => ({
  workflow_type: 'order',
  step_type: 'charge',
  input: toPayload({ amount: 5 }),
  attempt: 1,
  retry: new RetryPolicy({ maximumAttempts: 3 }).toProto(),
  timeout: null,
  heartbeat_details: null,
  ...fields,
});

test('a step task loads its step, runs the handler and records the output', async () => {
  const journal = new StepJournal(loaded());
  let seen;
  const steps = new Map([['charge', (input, info) => {
    seen = { input, stepId: info.stepId, key: info.idempotencyKey, attempt: info.attempt, type: info.workflowType };
    return { charged: input.amount };
  }]]);
  assert.equal(await runStepTask(task, journal, steps, { log }), 'completed');
  assert.deepEqual(seen, { input: { amount: 5 }, stepId: 'charge#2', key: 'wf-9:charge#2', attempt: 1, type: 'order' });
  // The load that takes the lease up carries the grant's proof; no other call does.
  assert.deepEqual(journal.calls[0], ['LoadStep', { workflow_id: 'wf-9', fence: 3, step_id: 'charge#2', lease_proof: new Uint8Array(Buffer.from('proof')) }]);
  assert.ok(journal.calls.slice(1).every(([, request]) => !('lease_proof' in request)));
  const [record] = journal.recorded('RecordStep');
  assert.equal(record.step_task, true);
  assert.equal(record.step_id, 'charge#2');
  assert.equal(record.fence, 3);
  assert.equal(record.attempt, 1);
  assert.deepEqual(fromPayload(record.output), { charged: 5 });
  assert.ok(record.start_time);
});

test('a failed attempt with retries left per the returned policy is recorded with retry_delay', async () => {
  const journal = new StepJournal(loaded({ attempt: 2, retry: new RetryPolicy({ initialInterval: 0.5, maximumAttempts: 3 }).toProto() }));
  const steps = new Map([['charge', () => { const e = new Error('declined'); e.name = 'CardError'; throw e; }]]);
  assert.equal(await runStepTask(task, journal, steps, { log }), 'retrying');
  const [record] = journal.recorded('RecordStep');
  assert.equal(record.attempt, 2);
  assert.equal(record.failure.type, 'CardError');
  assert.deepEqual(record.retry_delay, toDuration(1)); // 0.5 * 2^(2-1)
});

test('the last attempt, or a non-retryable error, is a final failure', async () => {
  const last = new StepJournal(loaded({ attempt: 3 }));
  const failing = new Map([['charge', () => { throw new Error('no'); }]]);
  assert.equal(await runStepTask(task, last, failing, { log }), 'failed');
  assert.equal(last.recorded('RecordStep')[0].retry_delay, undefined);

  const nonRetryable = new StepJournal(loaded({ retry: new RetryPolicy({ nonRetryableErrorTypes: ['Error'] }).toProto() }));
  assert.equal(await runStepTask(task, nonRetryable, failing, { log }), 'failed');
});

test('an attempt over the step timeout fails as StepTimeoutError', async () => {
  const journal = new StepJournal(loaded({ timeout: toDuration(0.05) }));
  const steps = new Map([['charge', () => new Promise((resolve) => setTimeout(resolve, 2000))]]);
  assert.equal(await runStepTask(task, journal, steps, { log }), 'retrying');
  assert.equal(journal.recorded('RecordStep')[0].failure.type, 'StepTimeoutError');
});

test('heartbeat details reach the next attempt and are recorded with step_task', async () => {
  const journal = new StepJournal(loaded({ heartbeat_details: toPayload({ done: 3 }) }));
  let details;
  const steps = new Map([['charge', async (input, info) => {
    details = info.heartbeatDetails;
    info.heartbeat({ done: 4 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    return 'ok';
  }]]);
  await runStepTask(task, journal, steps, { log });
  assert.deepEqual(details, { done: 3 });
  const [beat] = journal.recorded('RecordHeartbeat');
  assert.equal(beat.step_task, true);
  assert.equal(beat.step_id, 'charge#2');
  assert.deepEqual(fromPayload(beat.details), { done: 4 });
});

test('STEP_CLOSED / STALE_FENCE / WORKFLOW_CLOSED mean: drop it (LeaseLostError, TaskDone follows)', async () => {
  for (const [code, reason] of [['FAILED_PRECONDITION', 'STEP_CLOSED'], ['FAILED_PRECONDITION', 'STALE_FENCE'], ['FAILED_PRECONDITION', 'WORKFLOW_CLOSED']]) {
    const journal = new StepJournal(loaded(), { errors: { LoadStep: new JournalCallError(code, 'gone', reason) } });
    await assert.rejects(runStepTask(task, journal, new Map([['charge', () => 1]]), { log }), LeaseLostError);
  }
  const closedOnRecord = new StepJournal(loaded(), { errors: { RecordStep: new JournalCallError('FAILED_PRECONDITION', 'closed', 'STEP_CLOSED') } });
  await assert.rejects(runStepTask(task, closedOnRecord, new Map([['charge', () => 1]]), { log }), LeaseLostError);
});

test('an unreachable history, or an unknown step, leaves the lease to expire (JournalUnavailableError)', async () => {
  const journal = new StepJournal(loaded(), { errors: { LoadStep: new JournalCallError('UNAVAILABLE', 'down') } });
  await assert.rejects(runStepTask(task, journal, new Map([['charge', () => 1]]), { log }), JournalUnavailableError);
  const unknown = new StepJournal(loaded(), { errors: { LoadStep: new JournalCallError('NOT_FOUND', 'no step', 'STEP_NOT_FOUND') } });
  await assert.rejects(runStepTask(task, unknown, new Map([['charge', () => 1]]), { log }), JournalUnavailableError);
});

test('an output history refuses (too large) is recorded as a final failure', async () => {
  const journal = new StepJournal(loaded(), {
    errors: { RecordStep: new JournalCallError('RESOURCE_EXHAUSTED', 'over 2 MiB', 'PAYLOAD_TOO_LARGE') },
  });
  assert.equal(await runStepTask(task, journal, new Map([['charge', () => 'x'.repeat(10)]]), { log }), 'failed');
  const [first, second] = journal.recorded('RecordStep');
  assert.ok(first.output);
  assert.equal(second.failure.type, 'JournalRejectedError');
  assert.equal(second.retry_delay, undefined);
});

test('a step type this worker does not serve fails for good', async () => {
  const journal = new StepJournal(loaded({ step_type: 'refund' }));
  assert.equal(await runStepTask({ ...task, step_type: 'refund' }, journal, new Map(), { log }), 'failed');
  assert.equal(journal.recorded('RecordStep')[0].failure.type, 'UnknownStepType');
});

test('a load that reports the last attempt lost records it as WorkerLostError without running', async () => {
  const journal = new StepJournal(loaded({ attempt: 2, attempt_lost: true }));
  let ran = false;
  const steps = new Map([['charge', () => { ran = true; }]]);
  assert.equal(await runStepTask(task, journal, steps, { log }), 'retrying');
  assert.equal(ran, false);
  const [record] = journal.recorded('RecordStep');
  assert.equal(record.attempt, 2);
  assert.equal(record.failure.type, 'WorkerLostError');
  assert.ok(record.retry_delay);
});

test('a step task over its heartbeat timeout fails as StepHeartbeatTimeoutError', async () => {
  const journal = new StepJournal(loaded({ heartbeat_timeout: toDuration(0.05) }));
  const steps = new Map([['charge', (input, info) => new Promise((resolve) => info.signal.addEventListener('abort', resolve))]]);
  assert.equal(await runStepTask(task, journal, steps, { log }), 'retrying');
  assert.equal(journal.recorded('RecordStep')[0].failure.type, 'StepHeartbeatTimeoutError');
});
