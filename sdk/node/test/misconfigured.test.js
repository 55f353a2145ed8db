// Which host name a worker checks before connecting, per gRPC target form.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkerConfigurationError } from '../src/errors.js';
import { checkResolves, hostOf } from '../src/misconfigured.js';

test('the host a target resolves', () => {
  assert.equal(hostOf('localhost:7402'), 'localhost');
  assert.equal(hostOf('scheduler.perdure.svc'), 'scheduler.perdure.svc');
  assert.equal(hostOf('dns:///scheduler:7402'), 'scheduler');
  assert.equal(hostOf('dns://10.0.0.2/scheduler:7402'), 'scheduler');
  assert.equal(hostOf('[::1]:7402'), '::1');
  assert.equal(hostOf('ipv4:127.0.0.1:7402,127.0.0.1:7403'), null);
  assert.equal(hostOf('unix:/run/perdure.sock'), null);
});

test('a name that does not exist is a configuration error', async () => {
  await assert.rejects(checkResolves('scheduler.perdure.invalid:7402', 'scheduler'), (error) => {
    assert.ok(error instanceof WorkerConfigurationError);
    assert.match(error.message, /does not resolve/);
    return true;
  });
  await checkResolves('127.0.0.1:7402', 'scheduler'); // an address: nothing to resolve
});
