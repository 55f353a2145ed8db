// JSON payloads as google.protobuf.Value, Failures, Durations and Timestamps as the worker
// protocol carries them (proto-loader objects: the well-known types use camelCase fields).

/** @typedef {{nullValue?: string|number, numberValue?: number, stringValue?: string, boolValue?: boolean, structValue?: {fields: Record<string, any>}, listValue?: {values: any[]}, kind?: string}} ProtoValue */

/**
 * Encode a JSON value as a google.protobuf.Value. `undefined` at the top becomes null, object
 * properties that are `undefined` are left out and array items that are become null (as
 * JSON.stringify does); `toJSON()` is honoured (a Date becomes its ISO string). Throws
 * TypeError for what is not JSON: NaN/Infinity, bigint, functions, symbols, cycles.
 * @param {any} data
 * @returns {ProtoValue}
 */
export function toValue(data) {
  return encode(data, new Set(), '$');
}

function encode(data, seen, path) {
  if (data !== null && typeof data === 'object' && typeof data.toJSON === 'function') {
    data = data.toJSON();
  }
  if (data === null || data === undefined) return { nullValue: 'NULL_VALUE' };
  switch (typeof data) {
    case 'boolean':
      return { boolValue: data };
    case 'string':
      return { stringValue: data };
    case 'number':
      if (!Number.isFinite(data)) {
        throw new TypeError(`value at ${path} is not JSON-serializable: ${data} is not finite`);
      }
      return { numberValue: data };
    case 'object': {
      if (seen.has(data)) throw new TypeError(`value at ${path} is not JSON-serializable: a cycle`);
      seen.add(data);
      try {
        if (Array.isArray(data)) {
          return {
            listValue: {
              values: data.map((item, i) =>
                item === undefined || typeof item === 'function' || typeof item === 'symbol'
                  ? { nullValue: 'NULL_VALUE' }
                  : encode(item, seen, `${path}[${i}]`),
              ),
            },
          };
        }
        /** @type {Record<string, ProtoValue>} */
        const fields = {};
        for (const [key, item] of Object.entries(data)) {
          if (item === undefined) continue;
          fields[key] = encode(item, seen, `${path}.${key}`);
        }
        return { structValue: { fields } };
      } finally {
        seen.delete(data);
      }
    }
    default:
      throw new TypeError(`value at ${path} is not JSON-serializable: a ${typeof data}`);
  }
}

/**
 * Decode a google.protobuf.Value (unset or empty: null).
 * @param {ProtoValue|null|undefined} value
 * @returns {any}
 */
export function fromValue(value) {
  if (value === null || value === undefined) return null;
  const kind = value.kind ?? kindOf(value);
  switch (kind) {
    case 'numberValue':
    case 'number_value':
      return Number(value.numberValue ?? value.number_value);
    case 'stringValue':
    case 'string_value':
      return value.stringValue ?? value.string_value;
    case 'boolValue':
    case 'bool_value':
      return Boolean(value.boolValue ?? value.bool_value);
    case 'structValue':
    case 'struct_value': {
      const fields = (value.structValue ?? value.struct_value)?.fields ?? {};
      /** @type {Record<string, any>} */
      const out = {};
      for (const [key, item] of Object.entries(fields)) out[key] = fromValue(item);
      return out;
    }
    case 'listValue':
    case 'list_value':
      return ((value.listValue ?? value.list_value)?.values ?? []).map(fromValue);
    default:
      return null;
  }
}

function kindOf(value) {
  for (const key of ['numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue']) {
    if (value[key] !== undefined && value[key] !== null) return key;
  }
  return 'nullValue';
}

/** Whether a decoded proto Value is set (a Value field that was present on the wire). */
export function hasValue(value) {
  return value !== null && value !== undefined && Boolean(value.kind ?? kindOfSet(value));
}

function kindOfSet(value) {
  for (const key of ['nullValue', 'numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue']) {
    if (value[key] !== undefined && value[key] !== null) return key;
  }
  return '';
}

/**
 * Describe a thrown value for the journal: {type, message, stack_trace}.
 * @param {unknown} error
 */
export function failureFrom(error) {
  if (error instanceof Error) {
    return {
      type: error.name || error.constructor?.name || 'Error',
      message: error.message ?? '',
      stack_trace: error.stack ?? '',
    };
  }
  let message;
  try {
    message = typeof error === 'string' ? error : JSON.stringify(error);
  } catch {
    message = String(error);
  }
  return { type: 'Error', message: message ?? String(error), stack_trace: '' };
}

/**
 * Seconds (finite, >= 0) as a google.protobuf.Duration.
 * @param {number} seconds
 */
export function toDuration(seconds) {
  const whole = Math.floor(seconds);
  let nanos = Math.round((seconds - whole) * 1e9);
  let secs = whole;
  if (nanos >= 1e9) {
    secs += 1;
    nanos -= 1e9;
  }
  return { seconds: secs, nanos };
}

/**
 * A google.protobuf.Duration as seconds (unset: null).
 * @param {{seconds?: number|string, nanos?: number}|null|undefined} duration
 */
export function fromDuration(duration) {
  if (!duration) return null;
  return Number(duration.seconds ?? 0) + Number(duration.nanos ?? 0) / 1e9;
}

/**
 * A google.protobuf.Timestamp as milliseconds since the epoch (unset: null).
 * @param {{seconds?: number|string, nanos?: number}|null|undefined} ts
 */
export function timestampMs(ts) {
  if (!ts) return null;
  return Number(ts.seconds ?? 0) * 1000 + Number(ts.nanos ?? 0) / 1e6;
}

/**
 * Milliseconds since the epoch as a google.protobuf.Timestamp.
 * @param {number} ms
 */
export function toTimestamp(ms) {
  const seconds = Math.floor(ms / 1000);
  const nanos = Math.round((ms - seconds * 1000) * 1e6);
  return nanos >= 1e9 ? { seconds: seconds + 1, nanos: nanos - 1e9 } : { seconds, nanos };
}
