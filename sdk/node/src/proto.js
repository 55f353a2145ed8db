// Loads Perdure's .proto files at run time from the repository's proto/ directory.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { WorkerConfigurationError } from './errors.js';
import { currentCarrier } from './telemetry.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The proto/ directory: $PERDURE_PROTO_DIR, else the repository's (../../../proto from src/). */
export function protoDir() {
  return process.env.PERDURE_PROTO_DIR || path.resolve(HERE, '..', '..', '..', 'proto');
}

const FILES = [
  'perdure/api/worker/v1/task_service.proto',
  'perdure/api/worker/v1/journal_service.proto',
  'perdure/api/workflow/v1/workflow_service.proto',
];

/**
 * Field names stay as in the .proto files (snake_case); the well-known types (Value, Duration,
 * Timestamp) come from proto-loader's bundled copies, with camelCase fields. int64 as Number,
 * enums as their names, unset messages as null, and `oneofs` names the member set.
 */
export const LOADER_OPTIONS = Object.freeze({
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

let cached;

/**
 * The loaded package: service client constructors, and the raw package definition.
 * @returns {{TaskService: any, JournalService: any, WorkflowService: any, definition: any}}
 */
export function loadProtos() {
  if (cached) return cached;
  const definition = protoLoader.loadSync(FILES, { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
  const loaded = /** @type {any} */ (grpc.loadPackageDefinition(definition));
  cached = {
    TaskService: loaded.perdure.api.worker.v1.TaskService,
    JournalService: loaded.perdure.api.worker.v1.JournalService,
    WorkflowService: loaded.perdure.api.workflow.v1.WorkflowService,
    definition,
  };
  return cached;
}

/**
 * Channel options: round-robin over every address a name resolves to (each replica behind a
 * headless Service, or an "ipv4:host:port,host:port" list), 10 s keepalive pings, and the
 * message limits every Perdure channel and server uses (MAX_MESSAGE_BYTES in
 * perdure.telemetry.rpc): 64 MiB each way.
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
export const CHANNEL_OPTIONS = Object.freeze({
  'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
  'grpc.max_reconnect_backoff_ms': 1000, // a restarted replica is back in the rotation at once
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
});

/**
 * Channel credentials from the environment, as the Python SDK reads them: TLS trusting
 * PERDURE_TLS_CA when it is set, presenting PERDURE_TLS_CERT/PERDURE_TLS_KEY when those are
 * (mutual TLS); plaintext otherwise.
 */
export function channelCredentials(env = process.env) {
  if (!env.PERDURE_TLS_CA) return grpc.credentials.createInsecure();
  if (Boolean(env.PERDURE_TLS_CERT) !== Boolean(env.PERDURE_TLS_KEY)) {
    throw new WorkerConfigurationError('set both PERDURE_TLS_CERT and PERDURE_TLS_KEY, or neither');
  }
  const read = (name) => (env[name] ? fs.readFileSync(env[name]) : null);
  return grpc.credentials.createSsl(read('PERDURE_TLS_CA'), read('PERDURE_TLS_KEY'), read('PERDURE_TLS_CERT'));
}

/**
 * Client options for a channel: CHANNEL_OPTIONS, plus interceptors that send the caller's trace
 * context (`traceparent`, `tracestate`: empty unless the program traces) and `apiKey` as
 * `authorization: Bearer <key>` (when one is given) on every call, unary and streaming.
 * @param {string | undefined} apiKey
 */
export function clientOptions(apiKey) {
  const traced = (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        for (const [key, value] of Object.entries(currentCarrier())) metadata.set(key, value);
        next(metadata, listener);
      },
    });
  if (!apiKey) return { ...CHANNEL_OPTIONS, interceptors: [traced] };
  const bearer = (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set('authorization', `Bearer ${apiKey}`);
        next(metadata, listener);
      },
    });
  return { ...CHANNEL_OPTIONS, interceptors: [traced, bearer] };
}

/** The name of a numeric gRPC status code ("UNAVAILABLE"...). */
export function statusName(code) {
  for (const [name, value] of Object.entries(grpc.status)) {
    if (value === code) return name;
  }
  return 'UNKNOWN';
}

/**
 * The google.rpc.ErrorInfo reason in an error's `grpc-status-details-bin` (empty if none).
 * Decoded by hand (google.rpc.Status{details: repeated Any}, Any{type_url, value},
 * ErrorInfo{reason = 1}) to avoid shipping google/rpc protos.
 * @param {any} error a grpc-js ServiceError
 */
export function errorReason(error) {
  try {
    const raw = error?.metadata?.get?.('grpc-status-details-bin')?.[0];
    if (!raw) return '';
    const status = Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
    for (const [field, any] of fields(status)) {
      if (field !== 3 || !Buffer.isBuffer(any)) continue;
      let typeUrl = '';
      let value = null;
      for (const [f, v] of fields(any)) {
        if (f === 1 && Buffer.isBuffer(v)) typeUrl = v.toString('utf8');
        if (f === 2 && Buffer.isBuffer(v)) value = v;
      }
      if (typeUrl.endsWith('google.rpc.ErrorInfo') && value) {
        for (const [f, v] of fields(value)) {
          if (f === 1 && Buffer.isBuffer(v)) return v.toString('utf8');
        }
      }
    }
  } catch {
    // a malformed detail is no reason
  }
  return '';
}

/** The (field number, value) pairs of a protobuf message: varints as numbers, bytes as Buffers. */
function* fields(buf) {
  let i = 0;
  const varint = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated');
      const byte = buf[i++];
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) yield [field, varint()];
    else if (wire === 2) {
      const length = varint();
      yield [field, buf.subarray(i, i + length)];
      i += length;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else throw new Error('unsupported wire type');
  }
}
