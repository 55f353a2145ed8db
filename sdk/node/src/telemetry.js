// The worker's spans and trace context propagation, through @opentelemetry/api only: no-ops
// until the program registers an OpenTelemetry SDK (a tracer provider, the W3C propagator and a
// context manager, as NodeSDK does). Span names and attributes are the Python SDK's
// (docs/observability.md).

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';

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
