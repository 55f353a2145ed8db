// Replay: matching the journal to the code. Same rules as the Python SDK
// (services/worker/src/perdure/worker/_context.py): each durable call takes the next position
// and a step id ("name", "name#2", ...) at the moment it is made (synchronously, so that
// concurrent calls are numbered in call order), and is matched against the journal's event at
// that position. Remote steps' outcomes hold no position: they are found by step id.

import { timestampMs } from './payload.js';

export const EVENT = Object.freeze({
  STEP_COMPLETED: 'EVENT_TYPE_STEP_COMPLETED',
  STEP_FAILED: 'EVENT_TYPE_STEP_FAILED',
  STEP_ATTEMPT_FAILED: 'EVENT_TYPE_STEP_ATTEMPT_FAILED',
  STEP_ATTEMPT_STARTED: 'EVENT_TYPE_STEP_ATTEMPT_STARTED',
  TIMER_STARTED: 'EVENT_TYPE_TIMER_STARTED',
  SIGNAL_RECEIVED: 'EVENT_TYPE_SIGNAL_RECEIVED',
  SIGNAL_CONSUMED: 'EVENT_TYPE_SIGNAL_CONSUMED',
  SIGNAL_TIMED_OUT: 'EVENT_TYPE_SIGNAL_TIMED_OUT',
  STATE_UPDATED: 'EVENT_TYPE_STATE_UPDATED',
  CANCEL_REQUESTED: 'EVENT_TYPE_CANCEL_REQUESTED',
  CANCELLATION_DELIVERED: 'EVENT_TYPE_CANCELLATION_DELIVERED',
  STEP_SCHEDULED: 'EVENT_TYPE_STEP_SCHEDULED',
  PATCH_RECORDED: 'EVENT_TYPE_PATCH_RECORDED',
  CHILD_WORKFLOW_STARTED: 'EVENT_TYPE_CHILD_WORKFLOW_STARTED',
  CHILD_WORKFLOW_COMPLETED: 'EVENT_TYPE_CHILD_WORKFLOW_COMPLETED',
  CHILD_WORKFLOW_FAILED: 'EVENT_TYPE_CHILD_WORKFLOW_FAILED',
  APPROVAL_REQUESTED: 'EVENT_TYPE_APPROVAL_REQUESTED',
  APPROVAL_DECIDED: 'EVENT_TYPE_APPROVAL_DECIDED',
  APPROVAL_ESCALATED: 'EVENT_TYPE_APPROVAL_ESCALATED',
  APPROVAL_EXPIRED: 'EVENT_TYPE_APPROVAL_EXPIRED',
});

export const WAIT = Object.freeze({
  TIMER: 'WAIT_KIND_TIMER',
  SIGNAL: 'WAIT_KIND_SIGNAL',
  RETRY: 'WAIT_KIND_RETRY',
  STEP: 'WAIT_KIND_STEP',
  CHILD: 'WAIT_KIND_CHILD',
  APPROVAL: 'WAIT_KIND_APPROVAL',
});

// Calls of the code that hold a position in the journal; replay walks them in order. The
// platform's own events are no call and are skipped: WORKFLOW_PARKED and WORKFLOW_RESUMED (a
// resumed run replays past them), WORKFLOW_SUSPENDED (docs/worker-protocol.md §24).
const POSITIONED = new Set([
  EVENT.STEP_COMPLETED,
  EVENT.STEP_FAILED,
  EVENT.TIMER_STARTED,
  EVENT.SIGNAL_CONSUMED,
  EVENT.SIGNAL_TIMED_OUT,
  EVENT.STATE_UPDATED,
  EVENT.CANCELLATION_DELIVERED,
  EVENT.STEP_SCHEDULED,
  EVENT.CHILD_WORKFLOW_STARTED,
  EVENT.APPROVAL_REQUESTED,
]);
// A child workflow's outcome holds no position either: it names the child call by step id.
export const CHILD_OUTCOMES = new Set([EVENT.CHILD_WORKFLOW_COMPLETED, EVENT.CHILD_WORKFLOW_FAILED]);
// What happens to an approval after its request (docs/worker-protocol.md §29): platform events
// without a position, under the request's step id.
const APPROVAL_OUTCOMES = new Set([EVENT.APPROVAL_DECIDED, EVENT.APPROVAL_ESCALATED, EVENT.APPROVAL_EXPIRED]);
// What may be recorded while a run waits, and applied to its kept replay (Replay.extend).
const DELTA_TYPES = new Set([
  ...POSITIONED,
  EVENT.STEP_ATTEMPT_FAILED,
  EVENT.STEP_ATTEMPT_STARTED,
  EVENT.SIGNAL_RECEIVED,
  EVENT.PATCH_RECORDED,
  ...CHILD_OUTCOMES,
  ...APPROVAL_OUTCOMES,
  'EVENT_TYPE_WORKFLOW_SUSPENDED',
]);
DELTA_TYPES.delete(EVENT.CANCELLATION_DELIVERED);
export const STEP_OUTCOMES = new Set([EVENT.STEP_COMPLETED, EVENT.STEP_FAILED]);
/** Names of the SDK's own calls start with it; names of the code's may not. */
export const INTERNAL_PREFIX = '$';

/**
 * @typedef {{stepId: string, name: string, position: number, recorded: any}} Call
 * @typedef {{kind: string, name: string, until: any}} Wait
 */

/** The loaded journal, indexed for replay, and how far the code has got through it. */
export class Replay {
  /** @param {any} loaded a LoadJournalResponse */
  constructor(loaded) {
    const workflow = loaded.workflow ?? {};
    const events = loaded.events ?? [];
    // How far the code reached into the journal (WORKFLOW_STARTED at first), and the payload
    // bytes of the calls it reached (replayed or recorded): what ctx.info tells, the same on
    // every replay and on a resumed run.
    this.reached = 1;
    this.reachedBytes = 0;
    /** @type {Map<number, any>} position -> event, until the code reaches it */
    this.recorded = new Map();
    /** @type {Map<string, any>} step id -> STEP_COMPLETED/STEP_FAILED of a remote step */
    this.remoteOutcomes = new Map();
    /** @type {Map<string, any>} step id of a child call -> its child's outcome */
    this.childOutcomes = new Map();
    /** @type {Map<string, any[]>} step id -> its STEP_ATTEMPT_FAILED events */
    this.failedAttempts = new Map();
    /** @type {Map<string, number>} step id -> the last attempt started */
    this.startedAttempts = new Map();
    /** Signals received and not consumed yet, oldest first. */
    this.signals = [];
    /** @type {Map<string, Map<string, any>>} approval request's step id -> its later events by type */
    this.approvals = new Map();
    /** @type {Set<string>} step ids of the remote steps scheduled */
    this._scheduled = new Set(events.filter((e) => e.event_type === EVENT.STEP_SCHEDULED).map((e) => e.step_id));
    for (const event of events) this._index(event);
    /** @type {Map<string, any>} step id -> the progress its last attempt reported */
    this.progress = new Map();
    this.cancelRequested = Boolean(workflow.cancel_requested);
    this.cancelReason = events.find((e) => e.event_type === EVENT.CANCEL_REQUESTED)?.failure?.message ?? '';
    this.cancelDelivered = events.some((e) => e.event_type === EVENT.CANCELLATION_DELIVERED);
    this.noteProgress(loaded);
    /** The position of the code's next call. */
    this.position = 0;
    /** @type {Map<string, number>} */
    this._occurrences = new Map();
    /**
     * Events the code came past, counted from its next call on: patch markers (patches.js) and
     * steps' outcomes, with their payload bytes.
     * @type {{eventId: number|null, bytes: number, answered: boolean, due: boolean}[]}
     */
    this._reachLater = [];
    // A step begun (its attempts journaled) without an outcome: the code that wrote the journal
    // was running a call at its end, so that position is not the frontier (patches.js).
    const outcomes = new Set(events.filter((e) => STEP_OUTCOMES.has(e.event_type)).map((e) => e.step_id));
    const attempted = [...this.failedAttempts.keys(), ...this.startedAttempts.keys()];
    const begun = attempted.some((stepId) => !outcomes.has(stepId) && !this._scheduled.has(stepId));
    this._inFlightAt = begun ? Math.max(-1, ...this.recorded.keys()) + 1 : null;
  }

  /** Index one event of the journal, in journal order. */
  _index(event) {
    const type = event.event_type;
    if (type === EVENT.STEP_SCHEDULED) this._scheduled.add(event.step_id);
    if (STEP_OUTCOMES.has(type) && this._scheduled.has(event.step_id)) {
      this.remoteOutcomes.set(event.step_id, event);
    } else if (CHILD_OUTCOMES.has(type)) {
      this.childOutcomes.set(event.step_id, event);
    } else if (POSITIONED.has(type)) {
      this.recorded.set(Number(event.position), event);
    }
    if (type === EVENT.STEP_ATTEMPT_FAILED) {
      if (!this.failedAttempts.has(event.step_id)) this.failedAttempts.set(event.step_id, []);
      this.failedAttempts.get(event.step_id)?.push(event);
    } else if (type === EVENT.STEP_ATTEMPT_STARTED) {
      const last = this.startedAttempts.get(event.step_id) ?? 0;
      this.startedAttempts.set(event.step_id, Math.max(last, Number(event.attempt)));
    } else if (type === EVENT.SIGNAL_RECEIVED) {
      this.signals.push(event);
    } else if (APPROVAL_OUTCOMES.has(type)) {
      if (!this.approvals.has(event.step_id)) this.approvals.set(event.step_id, new Map());
      this.approvals.get(event.step_id)?.set(type, event);
    } else if (type === EVENT.SIGNAL_CONSUMED) {
      const consumed = new Set((event.consumed_event_ids ?? []).map(Number));
      this.signals = this.signals.filter((e) => !consumed.has(Number(e.event_id)));
    }
  }

  /**
   * The approval event `type` (DECIDED, ESCALATED, EXPIRED) of the request at `stepId`, or null.
   * @param {string} stepId
   * @param {string} type
   */
  approvalOutcome(stepId, type) {
    return this.approvals.get(stepId)?.get(type) ?? null;
  }

  /** The last progress each step's attempt reported, as a load gave it. */
  noteProgress(loaded) {
    this.progress = new Map((loaded.progress ?? []).map((/** @type {any} */ p) => [p.step_id, p]));
  }

  /**
   * Bring a replay kept from an earlier lease (sticky execution) up to date with the events
   * recorded since, as if it had been built from the whole journal. Only what may happen to a
   * waiting run applies: its own records (already reflected, as the code made them), signals,
   * remote steps' outcomes and attempts, child workflows' outcomes. Anything else (a cancel request, a record at a
   * position the code has not reached) returns false, and nothing must be resumed.
   * @param {any[]} events the events after the cached position, oldest first
   * @param {any} workflow the load's WorkflowInfo
   * @returns {boolean}
   */
  extend(events, workflow) {
    if (Boolean(workflow?.cancel_requested) !== this.cancelRequested) return false;
    for (const event of events) {
      const type = event.event_type;
      if (!DELTA_TYPES.has(type)) return false;
      if (type === EVENT.STEP_SCHEDULED) this._scheduled.add(event.step_id);
      const remoteOutcome = STEP_OUTCOMES.has(type) && this._scheduled.has(event.step_id);
      if (POSITIONED.has(type) && !remoteOutcome) {
        // The code's own record: what it says is part of this replay already.
        if (Number(event.position) >= this.position) return false;
        continue;
      }
      this._index(event);
    }
    return true;
  }

  /**
   * Take the next position and step id for a call named `name`, with the event the journal
   * recorded there (null if none).
   * @param {string} name
   * @returns {Call}
   */
  allocate(name, { step = false } = {}) {
    for (const later of this._reachLater) later.due = true;
    this._reachDue();
    const occurrence = (this._occurrences.get(name) ?? 0) + 1;
    this._occurrences.set(name, occurrence);
    const stepId = occurrence === 1 ? name : `${name}#${occurrence}`;
    const position = this.position++;
    const recorded = this.recorded.get(position) ?? null;
    this.recorded.delete(position);
    if (recorded && step && STEP_OUTCOMES.has(recorded.event_type)) {
      this.reachAtNextCall(Number(recorded.event_id), payloadSize(recorded));
    } else if (recorded) {
      this.reach(Number(recorded.event_id));
      this.reachedBytes += payloadSize(recorded);
    }
    return { stepId, name, position, recorded };
  }

  /**
   * The code reached the journal's event `eventId` (a replayed call's, or one it recorded):
   * ctx.info measures the journal up to there, the same on every replay.
   * @param {number} eventId
   */
  reach(eventId) {
    this.reached = Math.max(this.reached, eventId || this.reached + 1);
  }

  /**
   * The code came past the journal's event `eventId` between calls (a patch marker), or got a
   * step's outcome (recorded as `eventId`, with `bytes` of payload): ctx.info counts it from the
   * next call on, replayed or recorded alike (a step's outcome may still be on its way then:
   * `eventId` null for one sent ahead, until `answered`).
   * @param {number|null} eventId
   * @param {number} [bytes]
   */
  reachAtNextCall(eventId, bytes = 0) {
    const later = { eventId, bytes, answered: eventId !== null, due: false };
    this._reachLater.push(later);
    return later;
  }

  /**
   * A step's outcome sent ahead (`later`, from reachAtNextCall(null, bytes)) was answered:
   * recorded as `eventId` (0: history did not say). It counts once the code made its next call.
   * @param {{eventId: number|null, bytes: number, answered: boolean, due: boolean}} later
   * @param {number} eventId
   */
  answered(later, eventId) {
    later.eventId = eventId;
    later.answered = true;
    this._reachDue();
  }

  /** Count the outcomes the code has made its next call after, in order, as far as answered. */
  _reachDue() {
    while (this._reachLater.length && this._reachLater[0].due && this._reachLater[0].answered) {
      const later = this._reachLater.shift();
      this.reach(later.eventId);
      this.reachedBytes += later.bytes;
    }
  }

  /** No call is recorded at or after the code's next position (the calls before it were taken
   * out as they were reached), nor begun there: it runs from here for the first time. */
  atFrontier() {
    return this.recorded.size === 0 && this.position !== this._inFlightAt;
  }

  /** The event recorded at the code's next call, if any. */
  following() {
    return this.recorded.get(this.position);
  }

  /** Whether a cancellation recorded, or requested and not yet delivered, interrupts a wait at
   * `stepId` now (delivered as "<step id>:cancelled" at the next position). */
  interrupts(stepId, waiting) {
    const following = this.following();
    const deliveredHere =
      following && following.event_type === EVENT.CANCELLATION_DELIVERED && following.step_id === `${stepId}:cancelled`;
    return Boolean(deliveredHere || (waiting && this.cancelRequested && !this.cancelDelivered));
  }

  /**
   * The mismatch between a call and what the journal recorded at its position, or null.
   * @param {string} workflowId
   * @param {Call} call
   */
  mismatch(workflowId, call) {
    const recorded = call.recorded;
    if (!recorded || recorded.step_id === call.stepId) return null;
    return `workflow '${workflowId}': call #${call.position} of the code is '${call.stepId}', but the journal recorded '${recorded.step_id}' there; the code changed in a way that does not replay`;
  }

  /** Recorded calls the code has not reached: non-deterministic if the run is ending. */
  unconsumed() {
    return [...this.recorded.entries()].sort((a, b) => a[0] - b[0]).map(([, event]) => event.step_id);
  }

  /**
   * Take up to `limit` pending signals `name`, oldest first.
   * @param {string} name
   * @param {number} limit
   */
  takeSignals(name, limit) {
    const taken = [];
    for (const event of this.signals) {
      if (taken.length >= limit) break;
      if (event.name === name) taken.push(event);
    }
    this.signals = this.signals.filter((event) => !taken.includes(event));
    return taken;
  }
}

/**
 * The wait to suspend with: the earliest one that ends by itself, else the first call's.
 * @param {{wait: Wait}[]} blocked
 * @returns {Wait}
 */
export function chooseWait(blocked) {
  /** @type {{until: number, wait: Wait} | null} */
  let best = null;
  for (const entry of blocked) {
    const until = timestampMs(entry.wait.until);
    if (until !== null && (best === null || until < best.until)) best = { until, wait: entry.wait };
  }
  return best ? best.wait : blocked[0].wait;
}

/** An event's kind as a message names it ("step_completed", "timer_started"...). */
export function kindName(event) {
  return String(event.event_type).replace(/^EVENT_TYPE_/, '').toLowerCase();
}

/** A recorded call as a person reads it: its event's kind and step id. */
export function recordedCall(event) {
  return `${kindName(event)} '${event.step_id}'`;
}

// The SDK's own calls, by the prefix of their step ids (the code's may not start with "$").
const CALL_KINDS = [
  ['$sleep', 'timer'],
  ['$timeout:', 'signal timeout'],
  ['$signal:', 'signal wait'],
  ['$drain:', 'signal drain'],
  ['$approval:', 'approval'],
  ['$state:', 'set_state'],
  ['$now', 'now'],
  ['$uuid', 'uuid4'],
];

/**
 * A call of the code as a person reads it, from its step id alone: its kind and id.
 * @param {string} stepId
 */
export function callKind(stepId) {
  if (stepId.endsWith(':cancelled')) return `cancellation '${stepId}'`;
  const kind = CALL_KINDS.find(([prefix]) => stepId.startsWith(prefix))?.[1] ?? 'step';
  return `${kind} '${stepId}'`;
}

/**
 * The fields every record of a call carries.
 * @param {Call} call
 */
export function ref(call) {
  return { step_id: call.stepId, step_name: call.name, position: call.position };
}

/**
 * The bytes of an event's payload, inline or held by reference.
 * @param {any} event
 */
function payloadSize(event) {
  return event.payload?.data?.length || Number(event.payload_ref?.size ?? 0);
}
