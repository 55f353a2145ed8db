// Payloads ({encoding, data}), Failures, Durations and Timestamps as the worker protocol
// carries them (proto-loader objects: the well-known types use camelCase fields).
//
// A payload is exact both ways. JSON ("json/plain") is read with a parser of its own: an
// integer beyond Number's safe range (2**53 - 1) becomes a BigInt, and a BigInt is written as
// its digits. JavaScript has one number type, so a whole float from another language (Python's
// 1.0) reads as the number 1 and is written back as 1. A Buffer or Uint8Array travels as
// "binary/plain" and reads back as a Buffer.

export const JSON_ENCODING = 'json/plain';
export const BINARY_ENCODING = 'binary/plain';
// A payload this small and this shallow is one history takes as it is (its limits: 2 MiB, and
// JSON nested at most 32 levels): fewer than 33 brackets cannot nest deeper (as the Python
// SDK's _payload.surely_accepted).
const SURELY_ACCEPTED_BYTES = 64 * 1024;
const SURELY_ACCEPTED_BRACKETS = 32;
const OPENING = new Set([0x5b, 0x7b]); // [ {

/** @typedef {{encoding: string, data: Uint8Array}} Payload */

/**
 * Encode a value as a Payload. `undefined` at the top becomes null, object properties that are
 * `undefined` are left out and array items that are become null (as JSON.stringify does);
 * `toJSON()` is honoured (a Date becomes its ISO string). Throws TypeError naming what cannot
 * be encoded exactly: NaN/Infinity, functions, symbols, cycles, bytes inside a JSON value.
 * @param {any} data
 * @returns {Payload}
 */
export function toPayload(data) {
  if (data instanceof Uint8Array) return { encoding: BINARY_ENCODING, data: Buffer.from(data) };
  return { encoding: JSON_ENCODING, data: Buffer.from(stringify(data, new Set(), '$') ?? 'null', 'utf8') };
}

/**
 * Whether history is sure to take this payload (one of toPayload's) as it is: a step's output
 * that is may go ahead of its answer.
 * @param {Payload} payload
 */
export function surelyAccepted(payload) {
  const data = payload.data;
  if (data.length > SURELY_ACCEPTED_BYTES) return false;
  if (payload.encoding === BINARY_ENCODING) return true;
  let brackets = 0;
  for (const byte of data) if (OPENING.has(byte)) brackets += 1;
  return brackets <= SURELY_ACCEPTED_BRACKETS;
}

/** JSON text of a value, numbers exact; undefined where JSON.stringify leaves a value out. */
function stringify(data, seen, path) {
  if (data instanceof Uint8Array) {
    throw new TypeError(`value at ${path} is not encodable: bytes travel only as a whole payload`);
  }
  if (data !== null && typeof data === 'object' && typeof data.toJSON === 'function') {
    data = data.toJSON();
  }
  if (data === null) return 'null';
  switch (typeof data) {
    case 'undefined':
    case 'function':
    case 'symbol':
      if (path === '$') {
        if (data === undefined) return 'null';
        throw new TypeError(`value at ${path} is not encodable: a ${typeof data}`);
      }
      return undefined;
    case 'boolean':
      return data ? 'true' : 'false';
    case 'string':
      return JSON.stringify(data);
    case 'bigint':
      return data.toString();
    case 'number':
      if (!Number.isFinite(data)) throw new TypeError(`value at ${path} is not encodable: ${data} is not a JSON number`);
      return JSON.stringify(data);
    case 'object': {
      if (seen.has(data)) throw new TypeError(`value at ${path} is not encodable: a cycle`);
      seen.add(data);
      try {
        if (Array.isArray(data)) {
          return `[${data.map((item, i) => stringify(item, seen, `${path}[${i}]`) ?? 'null').join(',')}]`;
        }
        const fields = [];
        for (const [key, item] of Object.entries(data)) {
          const text = stringify(item, seen, `${path}.${key}`);
          if (text !== undefined) fields.push(`${JSON.stringify(key)}:${text}`);
        }
        return `{${fields.join(',')}}`;
      } finally {
        seen.delete(data);
      }
    }
    default:
      throw new TypeError(`value at ${path} is not encodable: a ${typeof data}`);
  }
}

/**
 * Decode a Payload (unset: null): a Buffer for "binary/plain", else the JSON value with
 * integers beyond Number's safe range as BigInt.
 * @param {Payload|null|undefined} payload
 * @returns {any}
 */
export function fromPayload(payload) {
  if (payload === null || payload === undefined) return null;
  const data = Buffer.from(payload.data ?? []);
  if (payload.encoding === BINARY_ENCODING) return data;
  if (payload.encoding && payload.encoding !== JSON_ENCODING) {
    throw new TypeError(`payload encoding '${payload.encoding}' is not one this SDK reads`);
  }
  return data.length ? parseExact(data.toString('utf8')) : null;
}

/** Whether a decoded Payload field is set (present on the wire). */
export function hasPayload(payload) {
  return payload !== null && payload !== undefined;
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
// eslint-disable-next-line no-control-regex -- a JSON string holds no raw control characters
const STRING = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
const WHITESPACE = /[ \t\n\r]*/y;

/**
 * Parse JSON text exactly: integers beyond Number's safe range become BigInt.
 * @param {string} text
 */
export function parseExact(text) {
  let at = 0;
  const skip = () => {
    WHITESPACE.lastIndex = at;
    WHITESPACE.exec(text);
    at = WHITESPACE.lastIndex;
  };
  const fail = (what) => {
    throw new SyntaxError(`invalid JSON at offset ${at}: ${what}`);
  };
  const token = (pattern) => {
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (!match) return null;
    at = pattern.lastIndex;
    return match;
  };
  const value = () => {
    skip();
    const char = text[at];
    if (char === '{') {
      at += 1;
      const out = {};
      skip();
      if (text[at] === '}') {
        at += 1;
        return out;
      }
      for (;;) {
        skip();
        const key = token(STRING);
        if (!key) fail('expected a string key');
        skip();
        if (text[at] !== ':') fail("expected ':'");
        at += 1;
        Object.defineProperty(out, JSON.parse(key[0]), { value: value(), enumerable: true, writable: true, configurable: true });
        skip();
        if (text[at] === ',') at += 1;
        else if (text[at] === '}') return (at += 1), out;
        else fail("expected ',' or '}'");
      }
    }
    if (char === '[') {
      at += 1;
      const out = [];
      skip();
      if (text[at] === ']') return (at += 1), out;
      for (;;) {
        out.push(value());
        skip();
        if (text[at] === ',') at += 1;
        else if (text[at] === ']') return (at += 1), out;
        else fail("expected ',' or ']'");
      }
    }
    if (char === '"') {
      const string = token(STRING);
      if (!string) fail('invalid string');
      return JSON.parse(string[0]);
    }
    for (const [word, literal] of /** @type {[string, boolean | null][]} */ ([['true', true], ['false', false], ['null', null]])) {
      if (text.startsWith(word, at)) return (at += word.length), literal;
    }
    const number = token(NUMBER);
    if (!number) fail('expected a value');
    if (number[1] === undefined && number[2] === undefined) {
      const whole = Number(number[0]);
      return Number.isSafeInteger(whole) ? whole : BigInt(number[0]);
    }
    return Number(number[0]);
  };
  const result = value();
  skip();
  if (at !== text.length) fail('unexpected text after the value');
  return result;
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
