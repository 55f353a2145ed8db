// Patches: a change of a workflow's code that runs started on the old code replay without, and
// every other run takes (ctx.patched, ctx.deprecatePatch), as the Python SDK's
// (services/worker/src/perdure/worker/_patches.py; docs/worker-protocol.md §22).
//
// The answer for a patch id is fixed once per run: true if the journal holds its marker
// (PATCH_RECORDED); else true, with a marker to record, if the code asks at the frontier (no
// call recorded or begun at or after its position); else false (the run went past this point,
// or began its next call there, on the old code). A marker takes no position. It is sent just
// before the run's next record, so asking stays synchronous; a run that suspends or ends before
// recording anything needs none: its replay asks at the frontier again and gets the same answer.

export const PATCH_RECORDED = 'EVENT_TYPE_PATCH_RECORDED';
export const MAX_PATCH_ID_LENGTH = 200;

export class Patches {
  /** @param {any[]} events the loaded journal's events */
  constructor(events) {
    /** @type {Map<string, any>} patch id -> its PATCH_RECORDED event */
    this._markers = new Map();
    /** @type {Map<string, boolean>} */
    this._answers = new Map();
    /** @type {{patch_id: string, position: number}[]} markers to record */
    this._unsent = [];
    /** @type {any[]} recorded markers the code came past, for ctx.info */
    this._unreached = [];
    this.takeIn(events);
  }

  /** Note the markers among `events` (a load, or the events since a kept run's). */
  takeIn(events) {
    for (const event of events ?? []) {
      if (event.event_type === PATCH_RECORDED && !this._markers.has(event.name)) this._markers.set(event.name, event);
    }
  }

  /**
   * The run's answer for `patchId`, asked with the code's next call at `position`.
   * @param {string} patchId
   * @param {number} position
   * @param {boolean} atFrontier
   * @returns {boolean}
   */
  patched(patchId, position, atFrontier) {
    const known = this._answers.get(patchId);
    if (known !== undefined) return known;
    const marker = this._markers.get(patchId);
    let answer = false;
    if (marker) {
      this._unreached.push(marker); // reached with the next call, as the first run's record was
      answer = true;
    } else if (atFrontier) {
      this._unsent.push({ patch_id: patchId, position });
      answer = true;
    }
    this._answers.set(patchId, answer);
    return answer;
  }

  /** The markers to record before the run's next record, once. */
  unsent() {
    return this._unsent.splice(0);
  }

  /** Whether markers wait to be recorded before the run's next record. */
  hasUnsent() {
    return this._unsent.length > 0;
  }

  /** The recorded markers the code came past since it last asked, once. */
  reached() {
    return this._unreached.splice(0);
  }
}

/** @param {unknown} patchId */
export function checkPatchId(patchId) {
  if (typeof patchId !== 'string' || !patchId || patchId.length > MAX_PATCH_ID_LENGTH) {
    throw new TypeError(`a patch id must be a string of 1 to ${MAX_PATCH_ID_LENGTH} characters: ${JSON.stringify(patchId)}`);
  }
}

/**
 * The same words in every SDK (a replay case holds them to it).
 * @param {string} workflowId
 * @param {string} patchId
 */
export function deprecatedMessage(workflowId, patchId) {
  return (
    `workflow '${workflowId}': the run took the old code path of patch '${patchId}', which is deprecated; ` +
    'run it on a build that still has the old path, or let it finish before deploying the deprecation'
  );
}
