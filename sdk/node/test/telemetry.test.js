// The SDK's spans, with an OpenTelemetry SDK registered as a program would: step attempts,
// suspensions and signal consumption in the task's trace, named as the Python SDK names them;
// journal calls as client spans whose context travels in JournalCall.trace_context.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { runWorkflowTask } from '../src/runner.js';
import { JournalClient } from '../src/journal.js';
import { loadProtos } from '../src/proto.js';
import { RetryPolicy } from '../src/retry.js';
import { FakeJournal, JournalBuilder } from './helpers.js';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

const SIGNAL_TRACE = '0af7651916cd43dd8448eb211c80319c';
const SIGNAL_SPAN = 'b7ad6b7169203331';

/** A FakeJournal that loads `builder`'s journal. */
class LoadingJournal extends FakeJournal {
  constructor(builder) {
    super();
    this.builder = builder;
  }

  async call(method, request) {
    if (method === 'LoadJournal') return this.builder.loaded();
    return super.call(method, request);
  }
}

test('a run traces its step attempts, signal consumption and suspension under the task span', async () => {
  exporter.reset();
  const builder = new JournalBuilder();
  builder.signal('approve', 'yes');
  builder.events[builder.events.length - 1].trace_context = { traceparent: `00-${SIGNAL_TRACE}-${SIGNAL_SPAN}-01` };
  const journal = new LoadingJournal(builder);
  const order = async (ctx) => {
    await ctx.step('reserve', () => 'ok');
    await ctx.waitForSignal('approve');
    await ctx.step('charge', () => {
      throw new Error('card declined');
    });
  };
  const workflows = new Map([['order', { fn: order, retry: new RetryPolicy({ initialInterval: 60 }) }]]);
  const tracer = trace.getTracer('test');
  await tracer.startActiveSpan('perdure.task.run', async (task) => {
    await runWorkflowTask({ workflow_id: 'wf-1', fence: 7 }, journal, workflows, { log: { info() {}, warn() {}, error() {} } });
    task.end();
  });
  const spans = exporter.getFinishedSpans();
  const named = (name) => spans.find((span) => span.name === name);
  const run = named('perdure.task.run');
  assert.equal(run.attributes['perdure.task.outcome'], 'suspend');
  const inRun = (span) => span.spanContext().traceId === run.spanContext().traceId && span.parentSpanContext?.spanId === run.spanContext().spanId;

  const reserve = named('perdure.step reserve');
  assert.ok(inRun(reserve));
  assert.deepEqual(
    [reserve.attributes['perdure.step.id'], reserve.attributes['perdure.step.attempt'], reserve.attributes['perdure.step.idempotency_key'], reserve.attributes['perdure.step.outcome']],
    ['reserve', 1, 'wf-1:reserve', 'completed'],
  );
  const charge = named('perdure.step charge');
  assert.equal(charge.attributes['perdure.step.outcome'], 'retrying');
  assert.ok(charge.attributes['perdure.step.next_retry_time']);
  assert.equal(charge.status.code, 2); // ERROR
  assert.match(charge.status.message, /card declined/);

  const consume = named('perdure.signal.consume');
  assert.ok(inRun(consume));
  assert.deepEqual([consume.attributes['perdure.signal.name'], consume.attributes['perdure.signal.count']], ['approve', 1]);
  assert.deepEqual(consume.links.map((link) => [link.context.traceId, link.context.spanId]), [[SIGNAL_TRACE, SIGNAL_SPAN]]);

  const suspend = named('perdure.suspend');
  assert.ok(inRun(suspend));
  assert.deepEqual([suspend.attributes['perdure.wait.kind'], suspend.attributes['perdure.wait.name']], ['retry', 'charge']);
});

test('a journal call is a client span named as the unary call, its context sent in JournalCall.trace_context', async () => {
  exporter.reset();
  const { JournalService } = loadProtos();
  const server = new grpc.Server();
  const carriers = [];
  server.addService(JournalService.service, {
    Session: (stream) => {
      stream.on('data', (message) => {
        carriers.push(...message.calls.map((call) => call.trace_context));
        stream.write({ answers: message.calls.map((call) => ({ id: call.id, set_state: {} })) });
      });
      stream.on('end', () => stream.end());
      stream.on('error', () => {});
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  const client = new JournalClient(`127.0.0.1:${port}`);
  try {
    await client.call('SetState', { workflow_id: 'w', fence: 1, key: 'k' });
  } finally {
    client.close();
    server.forceShutdown();
  }
  const span = exporter.getFinishedSpans().find((s) => s.name === '/perdure.api.worker.v1.JournalService/SetState');
  assert.ok(span);
  assert.equal(span.kind, 2); // CLIENT
  const { traceId, spanId } = span.spanContext();
  assert.equal(carriers[0].traceparent, `00-${traceId}-${spanId}-01`);
});
