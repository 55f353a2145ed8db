// Protobuf's JSON mapping (camelCase names, enums by name, int64 as numbers or strings, bytes in
// base64, Timestamps in RFC 3339, Durations as "1.5s"), to and from the objects the SDK's
// gRPC stubs read and write (proto-loader's: snake_case names, Number longs, Buffers, oneof
// names), through protobufjs reflection of the repository's .proto files.

import path from 'node:path';
import protobuf from 'protobufjs';
import { protoDir } from './proto.js';

const root = new protobuf.Root();
// Imports resolve in proto/; google/protobuf/* come bundled with protobufjs.
root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : path.join(protoDir(), target));
root.loadSync('perdure/api/worker/v1/journal_service.proto', { keepCase: true });
root.resolveAll();

/** @param {string} name e.g. "perdure.api.worker.v1.JournalCall" */
export function type(name) {
  return root.lookupType(name);
}

const TIMESTAMP = 'google.protobuf.Timestamp';
const DURATION = 'google.protobuf.Duration';
/** As proto-loader hands messages to the SDK (src/proto.js LOADER_OPTIONS). */
const SDK_VIEW = { longs: Number, enums: String, defaults: true, oneofs: true };

const snake = (name) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
const camel = (name) => name.replace(/_([a-z0-9])/g, (_, letter) => letter.toUpperCase());

/**
 * A message in proto JSON, as the SDK's stubs would hand it over.
 * @param {protobuf.Type} messageType
 * @param {any} json
 */
export function fromJson(messageType, json) {
  return messageType.toObject(messageType.fromObject(plain(messageType, json)), SDK_VIEW);
}

/**
 * A message the SDK built (as it passes it to its stubs), in proto JSON: every field, defaults
 * included, messages left unset omitted.
 * @param {protobuf.Type} messageType
 * @param {any} object
 * @returns {any}
 */
export function toJson(messageType, object) {
  const message = messageType.fromObject(object);
  return json(messageType, messageType.toObject(message, { longs: String, enums: String, bytes: String, defaults: true }));
}

/**
 * A message in proto JSON read and printed again: one spelling for one value (3 and "3" as
 * int64, "1s" and "1.000s"), every field of the message printed.
 * @param {protobuf.Type} messageType
 * @param {any} value
 * @returns {any}
 */
export function normalJson(messageType, value) {
  return toJson(messageType, messageType.toObject(messageType.fromObject(plain(messageType, value)), SDK_VIEW));
}

/** proto JSON -> protobufjs fromObject's input (snake_case, well-known types as objects). */
function plain(messageType, value) {
  if (messageType.fullName === `.${TIMESTAMP}`) return timestampOf(value);
  if (messageType.fullName === `.${DURATION}`) return durationOf(value);
  /** @type {Record<string, any>} */
  const out = {};
  for (const [key, item] of Object.entries(value ?? {})) {
    const field = messageType.fields[key] ?? messageType.fields[snake(key)];
    if (!field) throw new Error(`${messageType.name} has no field ${key}`);
    if (item === null) continue;
    const convert = (v) => (field.resolvedType instanceof protobuf.Type ? plain(field.resolvedType, v) : v);
    if (field.map) out[field.name] = Object.fromEntries(Object.entries(item).map(([k, v]) => [k, convert(v)]));
    else if (field.repeated) out[field.name] = item.map(convert);
    else out[field.name] = convert(item);
  }
  return out;
}

/** protobufjs toObject's output (snake_case) -> proto JSON (camelCase, well-known types as strings). */
function json(messageType, value) {
  if (messageType.fullName === `.${TIMESTAMP}`) return timestampText(value);
  if (messageType.fullName === `.${DURATION}`) return durationText(value);
  /** @type {Record<string, any>} */
  const out = {};
  for (const field of messageType.fieldsArray) {
    const item = value[field.name];
    if (item === null || item === undefined) continue;
    const convert = (v) => (field.resolvedType instanceof protobuf.Type ? json(field.resolvedType, v) : v);
    if (field.map) out[camel(field.name)] = Object.fromEntries(Object.entries(item).map(([k, v]) => [k, convert(v)]));
    else if (field.repeated) out[camel(field.name)] = item.map(convert);
    else out[camel(field.name)] = convert(item);
  }
  return out;
}

function timestampOf(text) {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`not an RFC 3339 time: ${text}`);
  const fraction = /\.(\d+)/.exec(text)?.[1] ?? '';
  return { seconds: Math.floor(ms / 1000), nanos: Number(fraction.padEnd(9, '0').slice(0, 9)) };
}

function timestampText(ts) {
  const seconds = Number(ts.seconds ?? 0);
  const nanos = Number(ts.nanos ?? 0);
  const base = new Date(seconds * 1000).toISOString().replace(/\.\d+Z$/, '');
  return nanos ? `${base}.${String(nanos).padStart(9, '0').replace(/0+$/, '')}Z` : `${base}Z`;
}

function durationOf(text) {
  const match = /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(String(text));
  if (!match) throw new Error(`not a Duration: ${text}`);
  const sign = match[1] ? -1 : 1;
  return { seconds: sign * Number(match[2]), nanos: sign * Number((match[3] ?? '').padEnd(9, '0')) };
}

function durationText(duration) {
  const seconds = Number(duration.seconds ?? 0);
  const nanos = Number(duration.nanos ?? 0);
  const negative = seconds < 0 || nanos < 0;
  const fraction = nanos ? `.${String(Math.abs(nanos)).padStart(9, '0').replace(/0+$/, '')}` : '';
  return `${negative ? '-' : ''}${Math.abs(seconds)}${fraction}s`;
}
