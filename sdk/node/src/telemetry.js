// The worker's spans, step metrics and trace context propagation, through @opentelemetry/api only: no-ops
// until the program registers an OpenTelemetry SDK (a tracer provider, the W3C propagator and a
// context manager, as NodeSDK does). Span names and attributes are the Python SDK's
// (docs/observability.md).

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, metrics, propagation, trace } from '@opentelemetry/api';

const TRACER_NAME = 'perdure.worker';

/** The tracer, looked up at each use: a provider registered after import still counts. */
function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/**
 * The active span's context as a W3C carrier (empty when nothing traces).
 * @returns {Record<string, string>}
 */
export function currentCarrier() {
  /** @type {Record<string, string>} */
  const carrier = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/**
 * A context whose parent is the carrier's span (the root context when it is empty).
 * @param {Record<string, string> | null | undefined} carrier
 */
export function contextFrom(carrier) {
  return propagation.extract(ROOT_CONTEXT, carrier ?? {});
}

/**
 * Links to the spans the carriers name, skipping empty ones.
 * @param {(Record<string, string> | null | undefined)[]} carriers
 * @returns {import('@opentelemetry/api').Link[]}
 */
export function linksTo(carriers) {
  return carriers
    .map((carrier) => trace.getSpanContext(contextFrom(carrier)))
    .filter((spanContext) => spanContext && trace.isSpanContextValid(spanContext))
    .map((spanContext) => ({ context: /** @type {import('@opentelemetry/api').SpanContext} */ (spanContext) }));
}

/**
 * Run `fn(span)` in a span made current for it (and the calls it makes); end the span after.
 * An error thrown marks the span ERROR unless `fn` already set its status.
 * @template T
 * @param {string} name
 * @param {{attributes?: import('@opentelemetry/api').Attributes, links?: import('@opentelemetry/api').Link[],
 *   kind?: SpanKind, parent?: import('@opentelemetry/api').Context}} options
 * @param {(span: import('@opentelemetry/api').Span) => Promise<T>} fn
 * @returns {Promise<T>}
 */
export function inSpan(name, options, fn) {
  const { parent = context.active(), ...spanOptions } = options;
  const span = tracer().startSpan(name, spanOptions, parent);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Mark a span failed with `error`.
 * @param {import('@opentelemetry/api').Span} span
 * @param {unknown} error
 */
export function failed(span, error) {
  const err = /** @type {any} */ (error);
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
}

let fencedCounter = null;

/**
 * A task's lease could not be renewed in time and its work was stopped: mark its span, and
 * count it (perdure.worker.leases.self_fenced, by task queue).
 * @param {import('@opentelemetry/api').Span} span
 * @param {string} taskQueue
 */
export function selfFenced(span, taskQueue) {
  span.setAttribute('perdure.task.outcome', 'self_fenced');
  span.setStatus({ code: SpanStatusCode.ERROR, message: 'lease not renewed in time' });
  fencedCounter ??= metrics.getMeter(TRACER_NAME).createCounter('perdure.worker.leases.self_fenced', {
    unit: '{lease}',
    description:
      'Leases whose work this worker stopped because it could not renew them before their deadline (the scheduler or the link to it was down), by task queue.',
  });
  fencedCounter.add(1, { 'perdure.task_queue': taskQueue });
}

/**
 * The client span of a journal call sent on the Session stream: named as the unary call's
 * span would be, one name in traces whichever way the call travelled.
 * @template T
 * @param {string} method e.g. "RecordStep"
 * @param {(span: import('@opentelemetry/api').Span) => Promise<T>} fn
 */
export function journalCallSpan(method, fn) {
  const service = 'perdure.api.worker.v1.JournalService';
  const attributes = { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method };
  return inSpan(`/${service}/${method}`, { kind: SpanKind.CLIENT, attributes }, fn);
}

/**
 * What a wait is for, as span attributes.
 * @param {{kind: string, name: string, until?: any}} wait
 * @param {(ts: any) => number | null} timestampMs
 */
export function waitAttributes(wait, timestampMs) {
  /** @type {Record<string, string>} */
  const attributes = {
    'perdure.wait.kind': String(wait.kind).replace(/^WAIT_KIND_/, '').toLowerCase(),
    'perdure.wait.name': wait.name,
  };
  const until = wait.until ? timestampMs(wait.until) : null;
  if (until !== null) attributes['perdure.wait.until'] = new Date(until).toISOString();
  return attributes;
}

/**
 * Start a span (not made current: see `withSpan`); the caller ends it.
 * @param {string} name
 * @param {import('@opentelemetry/api').Attributes} attributes
 */
export function startSpan(name, attributes) {
  return tracer().startSpan(name, { attributes });
}

/**
 * Run `fn` with `span` current (the calls it makes nest in it).
 * @template T
 * @param {import('@opentelemetry/api').Span} span
 * @param {() => T} fn
 * @returns {T}
 */
export function withSpan(span, fn) {
  return context.with(trace.setSpan(context.active(), span), fn);
}

/** Seconds; the Python SDK's buckets (perdure.telemetry.setup.DURATION_BUCKETS). */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
let instruments = null;

/** The step instruments, made at first use: a meter provider registered after import counts. */
function stepInstruments() {
  if (instruments) return instruments;
  const meter = metrics.getMeter(TRACER_NAME);
  instruments = {
    attempts: meter.createCounter('perdure.step.attempts', {
      unit: '{attempt}',
      description: 'Step attempts run, by workflow type, step name and outcome (completed, retrying, failed).',
    }),
    duration: meter.createHistogram('perdure.step.duration', {
      unit: 's',
      description: 'How long one step attempt ran, by workflow type, step name and outcome.',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    }),
  };
  return instruments;
}

/**
 * @typedef {{span: import('@opentelemetry/api').Span, name: string, workflowType: string, started: number}} StepAttemptTrace
 */

/**
 * Begin tracing a step attempt: its span `perdure.step <name>`, as the Python SDK names it.
 * @param {string} name
 * @param {{stepId: string, attempt: number, idempotencyKey: string, workflowType: string}} step
 * @returns {StepAttemptTrace}
 */
export function stepAttemptSpan(name, step) {
  const span = startSpan(`perdure.step ${name}`, {
    'perdure.step.name': name,
    'perdure.step.id': step.stepId,
    'perdure.step.attempt': step.attempt,
    'perdure.step.idempotency_key': step.idempotencyKey,
  });
  return { span, name, workflowType: step.workflowType, started: performance.now() };
}

/**
 * Record how a step attempt ended on its span, and end it, and in the metrics
 * (perdure.step.attempts, perdure.step.duration): completed (no error), retrying (an error
 * and the next attempt's time), or failed.
 * @param {StepAttemptTrace} attempt
 * @param {unknown} [error]
 * @param {number | null} [retryAtMs]
 */
export function stepAttemptEnded(attempt, error, retryAtMs = null) {
  const { span } = attempt;
  const outcome = error === undefined ? 'completed' : retryAtMs !== null ? 'retrying' : 'failed';
  span.setAttribute('perdure.step.outcome', outcome);
  if (error !== undefined) failed(span, error);
  if (retryAtMs !== null) span.setAttribute('perdure.step.next_retry_time', new Date(retryAtMs).toISOString());
  span.end();
  const attributes = { 'perdure.workflow.type': attempt.workflowType, 'perdure.step.name': attempt.name, 'perdure.step.outcome': outcome };
  const { attempts, duration } = stepInstruments();
  attempts.add(1, attributes);
  duration.record((performance.now() - attempt.started) / 1000, attributes);
}

/**
 * Set an attribute on the span current now (the task's run), if any.
 * @param {string} key
 * @param {string} value
 */
export function setRunAttribute(key, value) {
  trace.getActiveSpan()?.setAttribute(key, value);
}

/**
 * If this run ends a wait, a span of the whole wait: from the suspension to the load, both on
 * the database clock (no process was running meanwhile).
 * @param {any} loaded a LoadJournalResponse
 * @param {(ts: any) => number | null} timestampMs
 */
export function traceEndedWait(loaded, timestampMs) {
  const events = loaded.events ?? [];
  let last = null; // the last run's last event
  for (let i = events.length - 1; i >= 0; i--) {
    if (Number(events[i].fence) > 0) {
      last = events[i];
      break;
    }
  }
  if (!last || last.event_type !== 'EVENT_TYPE_WORKFLOW_SUSPENDED' || !last.wait) return;
  const start = timestampMs(last.event_time);
  const end = timestampMs(loaded.now);
  if (start === null || end === null) return;
  const span = tracer().startSpan('perdure.wait', { attributes: waitAttributes(last.wait, timestampMs), startTime: start });
  span.end(end);
}

let latenessHistogram = null;

/**
 * A timer this worker waited out (granted ahead of time) fired: measure how late
 * (perdure.timer.lateness, kind "timer") and give it a perdure.timer.fire span from its due
 * time to now, whose length is how late it fired; as the scheduler does for the timers it fires.
 * @param {number} dueMs on the database clock
 * @param {number} nowMs the database clock now
 * @param {Record<string, string>} attributes
 */
export function timerFired(dueMs, nowMs, attributes) {
  const lateBy = Math.max(0, nowMs - dueMs) / 1000;
  latenessHistogram ??= metrics.getMeter(TRACER_NAME).createHistogram('perdure.timer.lateness', {
    unit: 's',
    description: 'How late timed wake-ups (timer, signal timeout, retry) fire, by kind.',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  latenessHistogram.record(lateBy, { 'perdure.wait.kind': 'timer' });
  const fired = { ...attributes, 'perdure.wait.kind': 'timer', 'perdure.timer.lateness_ms': Math.round(lateBy * 1e6) / 1000 };
  tracer().startSpan('perdure.timer.fire', { attributes: fired, startTime: dueMs }).end(dueMs + lateBy * 1000);
}
