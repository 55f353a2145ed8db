// Starting a run with flow settings from the Node.js client: mapped to
// StartWorkflowRequest.flow (exact on the wire, BigInts included), checked before sending.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import protobuf from 'protobufjs';
import { Client } from '../src/client.js';
import { loadProtos, protoDir } from '../src/proto.js';

/** StartWorkflowRequest as protobufjs reads it, int64 as exact decimal strings. */
function readStart(bytes) {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => path.join(protoDir(), target);
  root.loadSync('perdure/api/workflow/v1/workflow_service.proto');
  const type = root.lookupType('perdure.api.workflow.v1.StartWorkflowRequest');
  return type.toObject(type.decode(bytes), { longs: String, enums: String });
}

/** A client whose StartWorkflow calls are kept, as serialized for the wire and read back. */
function recordingClient() {
  const client = new Client({ address: '127.0.0.1:1' });
  const { WorkflowService } = loadProtos();
  const method = WorkflowService.service.StartWorkflow;
  /** @type {any[]} */
  const sent = [];
  client._client = {
    StartWorkflow(request, options, callback) {
      sent.push(readStart(method.requestSerialize(request)));
      callback(null, { workflow_id: request.workflow_id, run_id: 'r-1' });
    },
    close() {},
  };
  return { client, sent };
}

test('startWorkflow sends the run flow settings; BigInt budgets stay exact on the wire', async () => {
  const { client, sent } = recordingClient();
  await client.startWorkflow('agent', { q: 1 }, {
    workflowId: 'wf-1',
    keys: ['tenant:acme', 'tier:gold'],
    priority: 1,
    fairnessKey: 'tenant:acme',
    budget: { units: 2n ** 62n + 1n, costMicros: 5_000_000 },
    onBudgetExceeded: 'fail',
  });
  await client.startWorkflow('agent', null, { budget: { costMicros: 1 }, onBudgetExceeded: 'wait' });
  await client.startWorkflow('agent');
  const [first, second, third] = sent;
  assert.deepEqual(first.flow, {
    keys: ['tenant:acme', 'tier:gold'],
    priority: 1,
    fairnessKey: 'tenant:acme',
    budget: { units: '4611686018427387905', costMicros: '5000000' },
    onBudgetExceeded: 'BUDGET_EXCEEDED_ACTION_FAIL',
  });
  // No limit on units: the optional field stays unset.
  assert.deepEqual(second.flow, { budget: { costMicros: '1' }, onBudgetExceeded: 'BUDGET_EXCEEDED_ACTION_WAIT' });
  assert.equal(third.flow, undefined);
  client.close();
});

test('bad flow settings throw before anything is sent', () => {
  const { client, sent } = recordingClient();
  /** @type {Array<[any, any, RegExp]>} */
  const cases = [
    [{ priority: 0 }, RangeError, /priority must be 1 \(served first\) to 5/],
    [{ priority: 1.5 }, TypeError, /priority must be an integer/],
    [{ keys: ['a', 'a'] }, RangeError, /must not repeat/],
    [{ fairnessKey: 'x'.repeat(201) }, RangeError, /fairnessKey must be at most 200/],
    [{ budget: { units: 2 ** 60 } }, RangeError, /budget.units is past 2\^53/],
    [{ budget: 5 }, TypeError, /budget must be an object/],
    [{ onBudgetExceeded: 'retry' }, RangeError, /onBudgetExceeded must be 'wait' or 'fail'/],
  ];
  for (const [options, ErrorClass, words] of cases) {
    assert.throws(() => client.startWorkflow('agent', null, options), (/** @type {any} */ error) => words.test(error?.message) && error instanceof ErrorClass);
  }
  assert.deepEqual(sent, []);
  client.close();
});
