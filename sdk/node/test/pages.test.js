// Loading a journal in pages: every page is asked for after the last event of the one before,
// under the same lease, and the pages come back as one response.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadJournal, payloadOf } from '../src/pages.js';

test('every page is loaded, each after the last event of the one before', async () => {
  const pages = [
    { workflow: { workflow_id: 'wf-1' }, events: [{ event_id: 1 }, { event_id: 2 }], more: true, now: 'first', history_length: 5 },
    { workflow: { workflow_id: 'wf-1' }, events: [{ event_id: 3 }], more: true, now: 'second', history_length: 5 },
    { workflow: { workflow_id: 'wf-1' }, events: [{ event_id: 4 }, { event_id: 5 }], more: false, now: 'third', history_length: 6, history_bytes: 900 },
  ];
  const asked = [];
  const call = async (method, request) => {
    asked.push([method, request]);
    return structuredClone(pages[asked.length - 1]);
  };
  const loaded = await loadJournal(call, { workflow_id: 'wf-1', fence: 3 });
  assert.deepEqual(asked, [
    // The first is the load (which raises the fence mark); the others say they are its pages.
    ['LoadJournal', { workflow_id: 'wf-1', fence: 3, after_event_id: 0 }],
    ['LoadJournal', { workflow_id: 'wf-1', fence: 3, after_event_id: 2, later_page: true }],
    ['LoadJournal', { workflow_id: 'wf-1', fence: 3, after_event_id: 3, later_page: true }],
  ]);
  assert.deepEqual(loaded.events.map((e) => e.event_id), [1, 2, 3, 4, 5]);
  assert.equal(loaded.now, 'first'); // the time of the load
  assert.equal(loaded.more, false);
  assert.deepEqual([loaded.history_length, loaded.history_bytes], [6, 900]); // the latest
});

test('an inline payload is given as it is; a reference is fetched by its digest', async () => {
  const asked = [];
  const call = async (method, request) => {
    asked.push([method, request]);
    return { payload: { encoding: 'json/plain', data: Buffer.from('"large"') } };
  };
  const inline = { encoding: 'json/plain', data: Buffer.from('1') };
  assert.equal(await payloadOf(call, { payload: inline, payload_ref: null }), inline);
  assert.deepEqual(asked, []);
  const sha256 = Buffer.alloc(32, 7);
  const fetched = await payloadOf(call, { payload: null, payload_ref: { sha256, encoding: 'json/plain', size: 7 } });
  assert.equal(fetched.data.toString(), '"large"');
  assert.deepEqual(asked, [['LoadPayload', { sha256 }]]);
});
