// The replay gate's check of one run, as the Python SDK's (perdure/worker/_replay_check.py):
// its recorded history replayed against workflow code by this SDK's own replay engine
// (WorkflowContext, Replay, the runner's execute), with no step run and nothing recorded
// (docs/worker-protocol.md §25). Recorded outcomes come from the history; the first call the
// journal does not hold (a record the engine would send) is the run's frontier: the check
// stops there and passes, as it does where the code would wait. A call that does not match the
// recorded one is non-determinism, reported with its position, the recorded call and the code's.

import fs from 'node:fs';
import { WorkflowContext } from './context.js';
import { fromPayload, toTimestamp } from './payload.js';
import { fromJson, type } from './protojson.js';
import { callKind, recordedCall } from './replay.js';
import { execute } from './runner.js';
import { workflowEntries } from './worker.js';

/** How long one run's code may take to reach its frontier or end (it runs no step). */
export const CHECK_MS = 60_000;
const NOT_A_CALL = new Set(['EVENT_TYPE_STEP_ATTEMPT_STARTED', 'EVENT_TYPE_STEP_ATTEMPT_FAILED']);
const quiet = { info() {}, warn() {}, error() {} };

/**
 * How one run's history replayed against the code.
 * @typedef {{workflowId: string, runId: string, workflowType: string,
 *   outcome: 'passed'|'non_deterministic'|'skipped'|'error', detail: string,
 *   position: number|null, expected: string, found: string}} Verdict
 * @typedef {{workflow: any, events: any[]}} History  WorkflowInfo and HistoryEvents, as the SDK's stubs give them
 */

/**
 * A saved history (`perdure workflow history ID --json`: {"workflow": WorkflowInfo, "events":
 * [HistoryEvent, ...]} in protobuf's JSON mapping) as the SDK's stubs would give it.
 * @param {any} json the file's parsed content
 * @returns {History}
 */
export function historyFromJson(json) {
  if (!json || typeof json !== 'object' || !Array.isArray(json.events)) {
    throw new TypeError('a saved history is a JSON object {"workflow": {...}, "events": [...]}, as `perdure workflow history ID --json` writes it');
  }
  const workflow = fromJson(type('perdure.api.workflow.v1.WorkflowInfo'), json.workflow ?? {});
  if (!workflow.workflow_type) throw new TypeError("the saved history's workflow has no workflowType");
  const HistoryEvent = type('perdure.api.workflow.v1.HistoryEvent');
  return { workflow, events: json.events.map((/** @type {any} */ event) => fromJson(HistoryEvent, event)) };
}

/**
 * A saved history file.
 * @param {string} file
 * @returns {History}
 */
export function readHistory(file) {
  try {
    return historyFromJson(JSON.parse(fs.readFileSync(file, 'utf8')));
  } catch (error) {
    throw new TypeError(`${file}: ${error instanceof Error ? error.message : error}`);
  }
}

/** A run's journal as its history holds it: any record the code would make is the frontier. */
class RecordedJournal {
  constructor() {
    /** @type {string | null} where the check stopped */
    this.frontier = null;
    /** @type {string | null} */
    this.problem = null;
  }

  /**
   * @param {string} method
   * @param {any} request
   */
  async call(method, request) {
    if (method === 'LoadPayload') {
      this.problem = 'an event holds its payload by reference: save histories through the public API, which gives payloads inline';
    } else {
      this.frontier ??= `reached the frontier at #${request.position ?? 0}: ${callKind(request.step_id ?? '')}, not recorded`;
    }
    throw new Error('the replay gate records nothing');
  }
}

/**
 * Replay a run's history against the code of its type in `workflows` (as `new Worker({workflows})`
 * takes them); no step runs.
 * @param {Record<string, any>} workflows
 * @param {History} history
 * @returns {Promise<Verdict>}
 */
export async function replayHistory(workflows, history) {
  const info = history.workflow ?? {};
  /** @type {(outcome: Verdict['outcome'], detail: string, where?: {position?: number|null, expected?: string, found?: string}) => Verdict} */
  const verdict = (outcome, detail, { position = null, expected = '', found = '' } = {}) => ({
    workflowId: info.workflow_id,
    runId: info.run_id ?? '',
    workflowType: info.workflow_type,
    outcome,
    detail,
    position,
    expected,
    found,
  });
  const entry = workflowEntries(workflows).get(info.workflow_type);
  if (!entry) return verdict('skipped', `type '${info.workflow_type}' is not in the code given`);
  const events = history.events ?? [];
  const started = events.find((event) => event.event_type === 'EVENT_TYPE_WORKFLOW_STARTED');
  const input = info.input?.data?.length ? info.input : (started?.payload ?? info.input);
  const loaded = { workflow: { ...info, input }, events, now: toTimestamp(Date.now()), progress: [] };
  const journal = new RecordedJournal();
  const ctx = new WorkflowContext(loaded, journal, { fence: 0, retry: entry.retry, log: quiet });
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), CHECK_MS);
  });
  const outcome = await Promise.race([execute(entry.fn, ctx, fromPayload(input)), timedOut]);
  clearTimeout(timer);
  ctx._halt({ kind: 'done' }); // whatever the code still runs may go no further
  const halted = /** @type {any} */ (ctx._halted);
  if (halted?.kind === 'park' && halted.error) {
    const error = halted.error;
    return verdict('non_deterministic', error.message, { position: error.position, expected: error.expected, found: error.found });
  }
  if (journal.problem) return verdict('error', journal.problem);
  if (outcome.kind === 'timeout') return verdict('error', `the code neither ended nor waited within ${CHECK_MS / 1000}s`);
  if (journal.frontier) return verdict('passed', journal.frontier);
  if (outcome.kind === 'park') {
    // The code ended without reaching every recorded call.
    const first = ctx.unconsumedSteps()[0];
    const event = events.find((e) => e.step_id === first && !NOT_A_CALL.has(e.event_type));
    return verdict('non_deterministic', outcome.value.message, {
      position: Number(event?.position ?? 0),
      expected: event ? recordedCall(event) : '',
      found: 'the end of the workflow',
    });
  }
  if (outcome.kind === 'suspend') {
    const kind = String(outcome.wait.kind).replace(/^WAIT_KIND_/, '').toLowerCase();
    return verdict('passed', `replayed up to its wait (${kind} '${outcome.wait.name}')`);
  }
  if (outcome.kind === 'failure') return verdict('passed', `replayed to its end (failed: ${outcome.value.type})`);
  return verdict('passed', `replayed to its end (${outcome.kind.replace(/_/g, ' ')})`);
}
