// A journal client that keeps one run's journal as history does, for tests that drive a run
// through several workflow tasks: records become events, LoadJournal answers after a position
// with the previous fence, and a record under a fence older than the run's mark is refused.

import { JournalCallError } from '../src/errors.js';
import { fromDuration, toPayload, toTimestamp } from '../src/payload.js';
import { NOW, runningWorkflow } from './helpers.js';

export class FakeHistory {
  constructor({ workflowId = 'wf-1', workflowType = 'loop', input = null, nowMs = NOW } = {}) {
    this.workflow = runningWorkflow({ workflowId, workflowType, input });
    this.nowMs = nowMs;
    this.events = [];
    this.mark = 0; // the highest fence that loaded the run
    this.loads = []; // LoadJournal requests
    this.records = []; // [method, request] of every other call
    this.add('EVENT_TYPE_WORKFLOW_STARTED', {});
  }

  add(type, fields) {
    this.events.push({ event_id: this.events.length + 1, event_type: type, position: 0, step_id: '', step_name: '', ...fields });
  }

  /** A signal arrives (from outside the run). */
  signal(name, payload) {
    this.add('EVENT_TYPE_SIGNAL_RECEIVED', { name, payload: toPayload(payload) });
  }

  /** A remote step's outcome arrives. */
  remoteCompleted(stepId, payload) {
    this.add('EVENT_TYPE_STEP_COMPLETED', { step_id: stepId, step_name: stepId, payload: toPayload(payload) });
  }

  cancel(reason = 'stop') {
    this.workflow.cancel_requested = true;
    this.add('EVENT_TYPE_CANCEL_REQUESTED', { failure: { type: 'Cancel', message: reason } });
  }

  /** The events as the run's code sees them: what a test compares across runs. */
  summary() {
    return this.events.map((e) => [e.event_type.replace('EVENT_TYPE_', ''), e.step_id, Number(e.position), e.payload?.data?.toString() ?? '']);
  }

  async call(method, request) {
    await new Promise((resolve) => setImmediate(resolve)); // answers come later
    if (method === 'LoadJournal') return this._load(request);
    this.records.push([method, structuredClone(request)]);
    if (Number(request.fence) < this.mark) throw new JournalCallError('FAILED_PRECONDITION', 'a newer lease loaded the run', 'STALE_FENCE');
    const ref = { step_id: request.step_id, step_name: request.step_name, position: request.position, fence: request.fence };
    const cancel_requested = this.workflow.cancel_requested;
    switch (method) {
      case 'RecordStep': {
        if (request.attempt_started) {
          this.add('EVENT_TYPE_STEP_ATTEMPT_STARTED', { ...ref, attempt: request.attempt, position: 0 });
          return { cancel_requested };
        }
        if (request.output) {
          this.add('EVENT_TYPE_STEP_COMPLETED', { ...ref, payload: request.output });
          return { cancel_requested };
        }
        if (request.retry_delay) {
          const due = toTimestamp(this.nowMs + fromDuration(request.retry_delay) * 1000);
          this.add('EVENT_TYPE_STEP_ATTEMPT_FAILED', { ...ref, position: 0, attempt: request.attempt, failure: request.failure, due_time: due });
          return { retry_time: due, cancel_requested };
        }
        this.add('EVENT_TYPE_STEP_FAILED', { ...ref, failure: request.failure });
        return { cancel_requested };
      }
      case 'StartTimer': {
        const fire = request.fire_time ?? toTimestamp(this.nowMs + fromDuration(request.delay) * 1000);
        this.add('EVENT_TYPE_TIMER_STARTED', { ...ref, due_time: fire });
        return { fire_time: fire, cancel_requested };
      }
      case 'ConsumeSignals':
        if (request.timed_out) this.add('EVENT_TYPE_SIGNAL_TIMED_OUT', ref);
        else this.add('EVENT_TYPE_SIGNAL_CONSUMED', { ...ref, payload: request.result, consumed_event_ids: request.event_ids });
        return { cancel_requested };
      case 'SetState':
        this.add('EVENT_TYPE_STATE_UPDATED', { ...ref, payload: request.value });
        return { cancel_requested };
      case 'ScheduleStep':
        this.add('EVENT_TYPE_STEP_SCHEDULED', { ...ref, payload: request.input });
        return { cancel_requested };
      case 'RecordPatch': {
        const step_id = `$patch:${request.patch_id}`;
        const marker = this.events.find((e) => e.event_type === 'EVENT_TYPE_PATCH_RECORDED' && e.step_id === step_id);
        if (!marker) this.add('EVENT_TYPE_PATCH_RECORDED', { step_id, step_name: '$patch', name: request.patch_id, position: request.position, fence: request.fence });
        return { event_id: (marker ?? this.events.at(-1)).event_id, cancel_requested };
      }
      case 'RecordCancellation':
        this.add('EVENT_TYPE_CANCELLATION_DELIVERED', ref);
        return { cancel_requested };
      case 'SuspendWorkflow':
        this.add('EVENT_TYPE_WORKFLOW_SUSPENDED', { wait: request.wait });
        return {};
      case 'FinishWorkflow':
        this.workflow.status = request.result ? 'WORKFLOW_STATUS_COMPLETED' : 'WORKFLOW_STATUS_FAILED';
        this.result = request.result ?? request.failure ?? request.park ?? request.cancelled;
        this.add('EVENT_TYPE_WORKFLOW_COMPLETED', {});
        return { status: this.workflow.status };
      default:
        return { cancel_requested };
    }
  }

  _load(request) {
    this.loads.push(structuredClone(request));
    const fence = Number(request.fence);
    if (fence < this.mark) throw new JournalCallError('FAILED_PRECONDITION', 'a newer lease loaded the run', 'STALE_FENCE');
    const previous = this.mark;
    this.mark = fence;
    const after = Number(request.after_event_id ?? 0);
    return {
      workflow: { ...this.workflow },
      events: this.events.filter((e) => e.event_id > after).map((e) => ({ ...e })),
      now: toTimestamp(this.nowMs),
      progress: [],
      previous_fence: previous,
      history_length: this.events.length,
    };
  }
}
