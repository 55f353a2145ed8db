// The replay contract (docs/worker-protocol.md §19): every case in tests/replay/cases/*.json run
// against this SDK's replay engine in process, the journal scripted at the journal client's
// boundary (a JournalCall out, a JournalAnswer in), the workflows from replay/workflows.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runStepTask, runWorkflowTask } from '../src/runner.js';
import { JournalCallError, LeaseLostError } from '../src/errors.js';
import { statusName } from '../src/proto.js';
import { fromJson, normalJson, toJson, type } from '../src/protojson.js';
import { REMOTE_STEPS, WORKFLOWS } from './replay/workflows.js';

const CASES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'tests', 'replay', 'cases');
const JournalCall = type('perdure.api.worker.v1.JournalCall');
const JournalAnswer = type('perdure.api.worker.v1.JournalAnswer');

// An outcome's kind -> the closing call, and the outcome's field carried in it.
const CLOSING = {
  suspended: ['suspendWorkflow', 'wait', 'wait'],
  completed: ['finishWorkflow', 'result', 'result'],
  failed: ['finishWorkflow', 'failure', 'failure'],
  cancelled: ['finishWorkflow', 'cancelled', 'failure'],
  parked: ['finishWorkflow', 'park', 'failure'],
  continuedAsNew: ['finishWorkflow', 'continueAsNew', 'continueAsNew'],
};
const WITHOUT_CLOSING_CALL = new Set(['none', 'leaseLost']);
const DEFAULTS = [0, '0', '', false, 0.0];

const quiet = { info() {}, warn() {}, error() {} };

/** "RecordStep" -> "recordStep", the call's JSON name in JournalCall. */
const jsonName = (method) => method[0].toLowerCase() + method.slice(1);

/** The call (proto JSON) that must close the run, or null. */
function closingCall(outcome) {
  if (WITHOUT_CLOSING_CALL.has(outcome.kind)) return null;
  const [method, field, key] = CLOSING[outcome.kind];
  /** @type {Record<string, any>} */
  const request = { [field]: outcome[key] ?? {} };
  for (const k of ['workflowId', 'fence']) if (k in outcome) request[k] = outcome[k];
  return { [method]: request };
}

/** Where `actual` (normal proto JSON) differs from what `raw` (the case's) lists. */
function differences(raw, normal, actual, where = '', found = []) {
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    if (actual === null || typeof actual !== 'object') {
      found.push(`${where || '.'}: expected ${JSON.stringify(normal)}, got ${JSON.stringify(actual)}`);
      return found;
    }
    for (const [key, value] of Object.entries(raw)) {
      const at = `${where}.${key}`;
      if (value === null) {
        const got = actual[key];
        const unset = got === undefined || DEFAULTS.includes(got) || (Array.isArray(got) && !got.length) || (typeof got === 'object' && !Object.keys(got).length);
        if (!unset) found.push(`${at}: expected unset, got ${JSON.stringify(got)}`);
      } else if (!(key in actual)) found.push(`${at}: expected ${JSON.stringify(normal[key])}, got nothing`);
      else differences(value, normal[key], actual[key], at, found);
    }
  } else if (Array.isArray(raw)) {
    if (!Array.isArray(actual) || actual.length !== raw.length) {
      found.push(`${where}: expected ${JSON.stringify(normal)}, got ${JSON.stringify(actual)}`);
      return found;
    }
    raw.forEach((item, i) => differences(item, normal[i], actual[i], `${where}[${i}]`, found));
  } else if (JSON.stringify(normal) !== JSON.stringify(actual)) {
    found.push(`${where}: expected ${JSON.stringify(normal)}, got ${JSON.stringify(actual)}`);
  }
  return found;
}

function withoutNulls(value) {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null).map(([k, v]) => [k, withoutNulls(v)]));
  }
  return value;
}

/** The journal client the engine talks to: each call checked against the case's next one. */
class ScriptedJournal {
  constructor(replayCase) {
    this.load = replayCase.load;
    this.stepTask = replayCase.stepTask;
    const closing = closingCall(replayCase.outcome);
    this.expected = [...replayCase.exchanges, ...(closing ? [{ call: closing }] : [])];
    this.made = []; // the calls made after the load, as proto JSON
    this.problems = [];
  }

  async call(method, request) {
    // Heartbeats and frames depend on how long steps take (and frames are not journaled):
    // answered, and not part of a case.
    if (method === 'RecordHeartbeat' || method === 'EmitFrames') return {};
    const made = toJson(JournalCall, { [fieldName(method)]: request });
    delete made.id;
    delete made.traceContext;
    if (method === 'LoadStep' && this.stepTask) {
      const { workflowId, stepId, fence } = this.stepTask;
      assert.equal(this.made.length, 0, 'LoadStep comes first');
      assert.deepEqual([request.workflow_id, request.step_id, String(request.fence)], [workflowId, stepId, String(fence ?? 0)]);
      this.made.push(made);
      return fromJson(type('perdure.api.worker.v1.LoadStepResponse'), this.stepTask.load);
    }
    if (method === 'LoadJournal' && this.load) {
      const workflow = this.load.workflow ?? {};
      assert.equal(this.made.length, 0, 'LoadJournal comes first');
      assert.deepEqual([request.workflow_id, String(request.fence)], [workflow.workflowId, String(workflow.fence ?? 0)]);
      this.made.push(made);
      return fromJson(type('perdure.api.worker.v1.LoadJournalResponse'), this.load);
    }
    this.made.push(made);
    const exchange = this.expected.shift();
    if (!exchange) {
      this.problems.push(`an unexpected call: ${JSON.stringify(made)}`);
      throw new JournalCallError('FAILED_PRECONDITION', 'not in the case', 'STALE_FENCE'); // stop the run here
    }
    const [expectedMethod] = Object.keys(exchange.call);
    if (expectedMethod !== jsonName(method)) {
      this.problems.push(`expected ${JSON.stringify(exchange.call)}, got ${JSON.stringify(made)}`);
      throw new JournalCallError('FAILED_PRECONDITION', 'not in the case', 'STALE_FENCE');
    }
    const normal = normalJson(JournalCall, withoutNulls(exchange.call));
    const found = differences(exchange.call, normal, made);
    if (found.length) this.problems.push(`call #${this.made.length - 1} ${expectedMethod}: ${found.join('; ')}`);
    const answer = fromJson(JournalAnswer, exchange.answer ?? { [expectedMethod]: {} });
    if (answer.result === 'error') {
      const error = answer.error;
      throw new JournalCallError(statusName(Number(error.code)), error.message, error.reason);
    }
    return answer[answer.result] ?? {};
  }
}

/** "RecordStep" -> "record_step", the call's field in JournalCall. */
const fieldName = (method) => method.replace(/[A-Z]/g, (letter, at) => (at ? '_' : '') + letter.toLowerCase());

const files = fs.existsSync(CASES) ? fs.readdirSync(CASES).filter((name) => name.endsWith('.json')).sort() : [];

test('the replay cases are there', () => {
  assert.ok(files.length > 0, `no replay cases in ${CASES}`);
});

// The engine's clock is the load's `now`: the monotonic time since is frozen.
const frozen = performance.now();
performance.now = () => frozen;

for (const file of files) {
  const replayCase = JSON.parse(fs.readFileSync(path.join(CASES, file), 'utf8'));
  test(`replay case ${file.replace(/\.json$/, '')}: ${replayCase.description}`, async () => {
    let ended = 'returned';
    let journal;
    try {
      if (replayCase.stepTask) {
        const { workflowId, stepId, fence, budgetExceeded = '' } = replayCase.stepTask;
        const task = { workflow_id: workflowId, step_id: stepId, step_type: replayCase.workflow, fence: Number(fence ?? 0), budget_exceeded: budgetExceeded };
        journal = new ScriptedJournal(replayCase);
        await runStepTask(task, journal, REMOTE_STEPS, { log: quiet });
      } else {
        const load = structuredClone(replayCase.load);
        load.workflow = { ...load.workflow, workflowType: load.workflow?.workflowType || replayCase.workflow };
        const task = { workflow_id: load.workflow.workflowId, fence: Number(load.workflow.fence ?? 0) };
        journal = new ScriptedJournal({ ...replayCase, load });
        await runWorkflowTask(task, journal, WORKFLOWS, { log: quiet });
      }
    } catch (error) {
      if (!(error instanceof LeaseLostError)) throw error;
      ended = 'leaseLost';
    }
    assert.deepEqual(journal.problems, [], `the engine's calls:\n${journal.made.map((c) => JSON.stringify(c)).join('\n')}`);
    assert.deepEqual(journal.expected.map((e) => e.call), [], 'calls the case expects that the engine did not make');
    assert.equal(ended === 'leaseLost', replayCase.outcome.kind === 'leaseLost', `the run ${ended}`);
  });
}
