// Fakes for unit tests: a hand-built journal (LoadJournalResponse) and a journal client that
// records every call and answers like history would.

import { toPayload, toTimestamp, timestampMs, fromDuration } from '../src/payload.js';
import { WorkflowContext } from '../src/context.js';
import { RetryPolicy } from '../src/retry.js';

export const NOW = Date.parse('2026-11-30T08:00:00Z');

/**
 * The WorkflowInfo of a running run, as a load returns it.
 * @param {{workflowId: string, workflowType: string, input: any, cancelRequested?: boolean}} run
 */
export function runningWorkflow({ workflowId, workflowType, input, cancelRequested = false }) {
  return {
    workflow_id: workflowId,
    workflow_type: workflowType,
    task_queue: 'q',
    status: 'WORKFLOW_STATUS_RUNNING',
    input: toPayload(input),
    cancel_requested: cancelRequested,
  };
}

/** Builds a journal event by event; positions and ids as history assigns them. */
export class JournalBuilder {
  constructor({ workflowId = 'wf-1', workflowType = 'order', input = null, cancelRequested = false } = {}) {
    this.workflow = runningWorkflow({ workflowId, workflowType, input, cancelRequested });
    this.events = [];
    this.progress = [];
    this.add('EVENT_TYPE_WORKFLOW_STARTED', {});
  }

  add(type, fields) {
    this.events.push({ event_id: this.events.length + 1, event_type: type, position: 0, step_id: '', step_name: '', ...fields });
    return this;
  }

  completed(position, stepId, payload, name = stepId.replace(/#\d+$/, '')) {
    return this.add('EVENT_TYPE_STEP_COMPLETED', { position, step_id: stepId, step_name: name, payload: toPayload(payload) });
  }

  /** A completed step whose output the journal holds by reference (`digest`, hex). */
  completedByReference(position, stepId, digest) {
    const payload_ref = { sha256: Buffer.from(digest, 'hex'), encoding: 'json/plain', size: 0 };
    return this.add('EVENT_TYPE_STEP_COMPLETED', { position, step_id: stepId, step_name: stepId, payload: null, payload_ref });
  }

  failed(position, stepId, type, message) {
    return this.add('EVENT_TYPE_STEP_FAILED', { position, step_id: stepId, step_name: stepId, failure: { type, message } });
  }

  attemptStarted(stepId, attempt) {
    return this.add('EVENT_TYPE_STEP_ATTEMPT_STARTED', { step_id: stepId, step_name: stepId, attempt, position: null });
  }

  attemptFailed(stepId, attempt, dueMs) {
    return this.add('EVENT_TYPE_STEP_ATTEMPT_FAILED', {
      step_id: stepId,
      attempt,
      failure: { type: 'Error', message: 'boom' },
      due_time: toTimestamp(dueMs),
    });
  }

  timer(position, stepId, dueMs) {
    return this.add('EVENT_TYPE_TIMER_STARTED', { position, step_id: stepId, step_name: stepId, due_time: toTimestamp(dueMs) });
  }

  signal(name, payload) {
    return this.add('EVENT_TYPE_SIGNAL_RECEIVED', { name, payload: toPayload(payload) });
  }

  scheduled(position, stepId, input, taskQueue = 'tools') {
    return this.add('EVENT_TYPE_STEP_SCHEDULED', {
      position,
      step_id: stepId,
      step_name: stepId.replace(/#\d+$/, ''),
      name: stepId.replace(/#\d+$/, ''),
      payload: toPayload(input),
      task_queue: taskQueue,
    });
  }

  /** A remote step's outcome: no position. */
  remoteCompleted(stepId, payload) {
    return this.add('EVENT_TYPE_STEP_COMPLETED', { step_id: stepId, step_name: stepId, payload: toPayload(payload) });
  }

  remoteFailed(stepId, type, message) {
    return this.add('EVENT_TYPE_STEP_FAILED', { step_id: stepId, step_name: stepId, failure: { type, message } });
  }

  cancelRequested(reason = 'stop') {
    this.workflow.cancel_requested = true;
    return this.add('EVENT_TYPE_CANCEL_REQUESTED', { failure: { type: 'Cancel', message: reason } });
  }

  cancellationDelivered(position, stepId) {
    return this.add('EVENT_TYPE_CANCELLATION_DELIVERED', { position, step_id: stepId, step_name: stepId });
  }

  state(position, key) {
    return this.add('EVENT_TYPE_STATE_UPDATED', { position, step_id: `$state:${key}`, step_name: `$state:${key}` });
  }

  loaded(nowMs = NOW) {
    return { workflow: this.workflow, events: this.events, now: toTimestamp(nowMs), progress: this.progress };
  }
}

/** A journal client answering like history; `calls` lists [method, request]. */
export class FakeJournal {
  constructor({ nowMs = NOW, cancelAfter = Infinity, errors = {}, payloads = {} } = {}) {
    this.nowMs = nowMs;
    this.payloads = payloads; // sha256 (hex) -> Payload, for LoadPayload
    this.calls = [];
    this.starts = []; // RecordStep{attempt_started} requests, in order
    this.cancelAfter = cancelAfter; // answers report cancel_requested from this call on
    this.errors = errors; // method -> error to throw (once)
  }

  async call(method, request) {
    // Attempt starts are kept apart: `calls` lists what the code's calls recorded.
    const started = method === 'RecordStep' && request.attempt_started;
    (started ? this.starts : this.calls).push(started ? structuredClone(request) : [method, structuredClone(request)]);
    await new Promise((resolve) => setImmediate(resolve)); // answers come later
    if (started) {
      // As history: a start sent `unless_cancel_requested` under a cancel request is kept out
      // of the journal (event id 0), and the answer says why.
      const cancel = this.calls.length >= this.cancelAfter;
      return { event_id: 0, retry_time: null, cancel_requested: cancel && Boolean(request.unless_cancel_requested) };
    }
    const error = this.errors[method];
    if (error) {
      delete this.errors[method];
      throw error;
    }
    const cancel_requested = this.calls.length >= this.cancelAfter;
    switch (method) {
      case 'RecordStep':
        return {
          event_id: this.calls.length,
          retry_time: request.retry_delay ? toTimestamp(this.nowMs + fromDuration(request.retry_delay) * 1000) : null,
          cancel_requested,
        };
      case 'StartTimer':
        // as history: a fire time asked for, else now plus the delay
        if (request.fire_time) return { fire_time: request.fire_time, cancel_requested };
        return { fire_time: toTimestamp(this.nowMs + fromDuration(request.delay) * 1000), cancel_requested };
      case 'LoadPayload':
        return { payload: this.payloads[Buffer.from(request.sha256).toString('hex')] };
      default:
        return { cancel_requested };
    }
  }

  methods() {
    return this.calls.map(([method]) => method);
  }

  recorded(method) {
    return this.calls.filter(([m]) => m === method).map(([, request]) => request);
  }
}

export function context(builder, journal = new FakeJournal(), retry = new RetryPolicy()) {
  return new WorkflowContext(builder.loaded(), journal, { fence: 7, retry });
}

export { timestampMs };
