// A run's journal as a worker loads it: every page of LoadJournal (a journal of any size comes in
// pages, each well under the message limit), and the payloads its events name by reference
// (payload_ref: stored once by content, fetched with LoadPayload).

/**
 * @typedef {(method: string, request: object) => Promise<any>} Call  a journal call of the lease
 * @typedef {{workflow_id: string, fence: number, lease_proof?: Uint8Array}} Lease
 */

/**
 * Load the journal under `lease`, fencing out every earlier holder: every page of it after the
 * event `after` (0: from the start; a kept run's position, for sticky execution), as one
 * response (the first page's run, clock, progress and previous fence, and every event).
 * @param {Call} call
 * @param {Lease} lease
 * @param {number} [after]
 */
export async function loadJournal(call, lease, after = 0) {
  const loaded = await call('LoadJournal', { ...lease, after_event_id: after });
  loaded.events = loaded.events ?? [];
  let page = loaded;
  while (page.more && page.events?.length) {
    const after = Number(page.events[page.events.length - 1].event_id);
    page = await call('LoadJournal', { ...lease, after_event_id: after, later_page: true });
    for (const event of page.events ?? []) loaded.events.push(event);
    loaded.history_length = page.history_length;
    loaded.history_bytes = page.history_bytes;
  }
  loaded.more = false;
  return loaded;
}

/**
 * The payload of an event: inline, or fetched by its reference (LoadPayload) only when asked,
 * and not kept.
 * @param {Call} call a journal call of the lease (its workflow id and fence filled in)
 * @param {any} event a HistoryEvent
 */
export async function payloadOf(call, event) {
  const ref = event?.payload_ref;
  if (!ref) return event?.payload ?? null;
  const loaded = await call('LoadPayload', { sha256: ref.sha256 });
  return loaded.payload;
}
