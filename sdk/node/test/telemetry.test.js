// The SDK's spans, with an OpenTelemetry SDK registered as a program would: step attempts,
// suspensions and signal consumption in the task's trace, named as the Python SDK names them;
// journal calls as client spans whose context travels in JournalCall.trace_context.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import grpc from '@grpc/grpc-js';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { runWorkflowTask } from '../src/runner.js';
import { JournalClient } from '../src/journal.js';
import { loadProtos } from '../src/proto.js';
import { RetryPolicy } from '../src/retry.js';
import { Worker } from '../src/worker.js';
import { FakeCluster } from './fake-cluster.js';
import { FakeJournal, JournalBuilder, NOW } from './helpers.js';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

/** Collects on demand. */
class TestReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
const reader = new TestReader();
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));

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

  // perdure.step.attempts and perdure.step.duration, by workflow type, step name and outcome.
  const { resourceMetrics } = await reader.collect();
  const points = (name) => resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === name)?.dataPoints ?? [];
  const attempts = points('perdure.step.attempts').map((p) => [p.attributes['perdure.workflow.type'], p.attributes['perdure.step.name'], p.attributes['perdure.step.outcome'], p.value]);
  assert.deepEqual(attempts.sort(), [['order', 'charge', 'retrying', 1], ['order', 'reserve', 'completed', 1]]);
  assert.equal(points('perdure.step.duration').length, 2);
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

test("a task's run is a perdure.task.run span, a child of Task.trace_context, with its step attempt in it", { timeout: 20_000 }, async () => {
  exporter.reset();
  const cluster = new FakeCluster();
  await cluster.start();
  const worker = new Worker({
    scheduler: cluster.address,
    history: cluster.address,
    taskQueue: 'tools',
    identity: 'traced-worker',
    logger: null,
    steps: { charge: (input) => ({ charged: input.amount }) },
  });
  const running = worker.run();
  try {
    await cluster.until(() => cluster.hellos.length === 1, 'the hello');
    const grant = { traceparent: `00-${SIGNAL_TRACE}-${SIGNAL_SPAN}-01` };
    cluster.push({ workflow_id: 'wf-1', workflow_type: '', fence: 4, step_id: 'charge', step_type: 'charge', trace_context: grant });
    await cluster.until(() => cluster.messages.some((m) => m.message === 'task_done'), 'TaskDone');
  } finally {
    worker.stop();
    await running;
    cluster.stop();
  }
  const spans = exporter.getFinishedSpans();
  const run = spans.find((span) => span.name === 'perdure.task.run');
  assert.ok(run);
  assert.deepEqual([run.spanContext().traceId, run.parentSpanContext?.spanId], [SIGNAL_TRACE, SIGNAL_SPAN]);
  assert.deepEqual(
    ['perdure.workflow.id', 'perdure.task_queue', 'perdure.fence', 'perdure.worker.identity', 'perdure.step.id', 'perdure.step.type'].map((k) => run.attributes[k]),
    ['wf-1', 'tools', 4, 'traced-worker', 'charge', 'charge'],
  );
  const step = spans.find((span) => span.name === 'perdure.step charge');
  assert.equal(step.parentSpanContext?.spanId, run.spanContext().spanId);
  assert.equal(step.attributes['perdure.step.outcome'], 'completed');
  const journalCalls = spans.filter((span) => span.name.startsWith('/perdure.api.worker.v1.JournalService/'));
  assert.ok(journalCalls.length >= 2 && journalCalls.every((span) => span.spanContext().traceId === SIGNAL_TRACE));
});

test('a timer waited out in the worker gets a perdure.timer.fire span and a lateness measure', async () => {
  exporter.reset();
  const builder = new JournalBuilder().timer(0, '$sleep', NOW + 50);
  const nap = async (ctx) => {
    await ctx.sleep(1);
    return 'awake';
  };
  await runWorkflowTask({ workflow_id: 'wf-1', fence: 7 }, new LoadingJournal(builder), new Map([['order', { fn: nap, retry: new RetryPolicy() }]]), {
    log: { info() {}, warn() {}, error() {} },
  });
  const fire = exporter.getFinishedSpans().find((span) => span.name === 'perdure.timer.fire');
  assert.ok(fire);
  assert.deepEqual([fire.attributes['perdure.step.id'], fire.attributes['perdure.wait.kind']], ['$sleep', 'timer']);
  assert.ok(Number(fire.attributes['perdure.timer.lateness_ms']) >= 0);
  const { resourceMetrics } = await reader.collect();
  const lateness = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === 'perdure.timer.lateness');
  assert.equal(lateness?.dataPoints[0].attributes['perdure.wait.kind'], 'timer');
});
