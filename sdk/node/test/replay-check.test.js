// The replay gate for Node.js code (src/replay-check.js, bin/perdure-replay.js) on saved
// histories in the format `perdure workflow history ID --json` writes: where the check stops,
// what it reports, the exit codes, and that no step body runs.

import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJson, replayHistory } from '../src/index.js';
import { ran, workflows as deployed } from './gate/deployed.js';
import { workflows as reordered } from './gate/reordered.js';
import { workflows as appended } from './gate/appended.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = path.join(HERE, '..', 'bin', 'perdure-replay.js');
const json = (value) => ({ encoding: 'json/plain', data: Buffer.from(JSON.stringify(value)).toString('base64') });
const completed = (eventId, position, stepId, value) => ({
  eventId: String(eventId),
  eventType: 'EVENT_TYPE_STEP_COMPLETED',
  stepId,
  stepName: stepId,
  ...(position ? { position: String(position) } : {}),
  payload: json(value),
});

/**
 * A run of `order` that completed two steps and waits for "ship", as a saved history.
 * @returns {{workflow: Record<string, any>, events: Record<string, any>[]}}
 */
function waitingForShip() {
  return {
    workflow: { workflowId: 'o-1', runId: 'r-1', workflowType: 'order', status: 'WORKFLOW_STATUS_WAITING', input: json(5) },
    events: [
      { eventId: '1', eventType: 'EVENT_TYPE_WORKFLOW_STARTED', payload: json(5) },
      completed(2, 0, 'reserve', 5),
      completed(3, 1, 'charge', 6),
      { eventId: '4', eventType: 'EVENT_TYPE_WORKFLOW_SUSPENDED', wait: { kind: 'WAIT_KIND_SIGNAL', name: 'ship' } },
    ],
  };
}

beforeEach(() => {
  ran.length = 0;
});
afterEach(() => {
  assert.deepEqual(ran, [], 'the check ran a step body');
});

test('the same code replays a run up to its wait', async () => {
  const verdict = await replayHistory(deployed, historyFromJson(waitingForShip()));
  assert.equal(verdict.outcome, 'passed', verdict.detail);
  assert.match(verdict.detail, /wait \(signal 'ship'\)/);
});

test('reordered steps are reported with the position and both calls', async () => {
  const verdict = await replayHistory(reordered, historyFromJson(waitingForShip()));
  assert.equal(verdict.outcome, 'non_deterministic');
  assert.deepEqual([verdict.position, verdict.expected, verdict.found], [0, "step_completed 'reserve'", "step 'charge'"]);
  assert.equal(verdict.runId, 'r-1');
});

test('a step added after the frontier passes', async () => {
  const history = waitingForShip();
  history.events.push(
    { eventId: '5', eventType: 'EVENT_TYPE_SIGNAL_RECEIVED', name: 'ship', payload: json(null) },
    { eventId: '6', eventType: 'EVENT_TYPE_SIGNAL_CONSUMED', stepId: '$signal:ship', stepName: 'ship', position: '2', consumedEventIds: ['5'], payload: json(null) },
    completed(7, 3, 'ship', 'shipped 6'),
  );
  const verdict = await replayHistory(appended, historyFromJson(history));
  assert.equal(verdict.outcome, 'passed', verdict.detail);
  assert.match(verdict.detail, /frontier at #4: step 'receipt'/);
});

test('code that ends before its recorded calls is reported; a type not in the code is skipped', async () => {
  const shortened = { order: async (ctx, n) => ctx.step('reserve', () => n) };
  const verdict = await replayHistory(shortened, historyFromJson(waitingForShip()));
  assert.equal(verdict.outcome, 'non_deterministic');
  assert.deepEqual([verdict.position, verdict.expected, verdict.found], [1, "step_completed 'charge'", 'the end of the workflow']);
  const other = waitingForShip();
  other.workflow.workflowType = 'invoice';
  assert.equal((await replayHistory(deployed, historyFromJson(other))).outcome, 'skipped');
});

test('perdure-replay exits 0, 1 or 2 on saved histories', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gate-'));
  try {
    const file = path.join(dir, 'o-1.json');
    fs.writeFileSync(file, JSON.stringify(waitingForShip()));
    const run = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
    const passed = run('--module', path.join(HERE, 'gate', 'appended.js'), '--file', file);
    assert.equal(passed.status, 0, passed.stdout + passed.stderr);
    assert.match(passed.stdout, /1 replayed, 1 passed, 0 non-deterministic, 0 skipped/);
    const failed = run('--module', path.join(HERE, 'gate', 'reordered.js'), '--file', file, '--json');
    assert.equal(failed.status, 1, failed.stdout + failed.stderr);
    const [verdict] = JSON.parse(failed.stdout).runs;
    assert.deepEqual([verdict.runId, verdict.position, verdict.found], ['r-1', 0, "step 'charge'"]);
    const missing = run('--module', path.join(dir, 'nowhere.js'), '--file', file);
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /cannot import --module/);
    const badSince = run('--module', path.join(HERE, 'gate', 'deployed.js'), '--since', 'a week');
    assert.equal(badSince.status, 2);
    assert.match(badSince.stderr, /'a week' is not a duration/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
