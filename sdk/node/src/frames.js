// Frames: the chunks one step attempt emits (`info.emit(chunk)`), sent to history with
// EmitFrames on the journal session, as the Python SDK's (perdure/worker/_frames.py).
//
// emit() never waits: it encodes the chunk, numbers it per (attempt, stream) from 0 and queues
// it. One sender per attempt sends what is queued at once when nothing is in flight; while a
// batch is in flight the chunks emitted meanwhile wait for the next one, so the first chunk
// leaves immediately and a fast emitter fills large batches. A batch is sent again with the
// same first_index until it is answered (history stores it once). The attempt's outcome is
// recorded only after flush(): every chunk it emitted is stored before its step is closed.

import { JournalUnavailableError, LeaseLostError, PerdureError } from './errors.js';
import { BINARY_ENCODING, toPayload } from './payload.js';

export const DEFAULT_STREAM = 'output';
export const MAX_STREAM_NAME = 200;
/** History's limit on one payload. */
export const MAX_CHUNK_BYTES = 2 * 1024 * 1024;
/** Chunks queued and not yet answered, per attempt: past either bound, emit() throws StreamBufferFullError. */
export const MAX_BUFFERED_CHUNKS = 50_000;
export const MAX_BUFFERED_BYTES = 32 * 1024 * 1024;
/** One EmitFrames request holds at most this much (at least one chunk). */
export const MAX_BATCH_CHUNKS = 1_000; // history takes at most 1,000 chunks a call
export const MAX_BATCH_BYTES = 1024 * 1024;
/** A batch left unanswered by an unreachable history is sent again this many times. */
const RESENDS = 3;
const RESEND_BACKOFF_MS = 500;

/**
 * `info.emit(chunk)` found too many of the attempt's chunks not yet stored by history (50,000
 * chunks or 32 MiB): the step emits faster than history stores them, or history cannot be
 * reached. Thrown into the step body, so the attempt fails (and is retried under its policy)
 * instead of holding an unbounded buffer.
 */
export class StreamBufferFullError extends PerdureError {
  constructor(message) {
    super(message);
    this.name = 'StreamBufferFullError';
  }
}

/**
 * An EmitFrames request of the attempt, without the lease's workflow id and fence.
 * @typedef {{step_id: string, attempt: number, stream: string, first_index: number,
 *   chunks: import('./payload.js').Payload[], step_task: boolean}} EmitRequest
 */

/** The emitter of one attempt: emit() from the body, flush() before its outcome is recorded. */
export class Frames {
  /**
   * @param {(request: EmitRequest) => Promise<any>} send sends one EmitFrames call under the
   *   lease; rejects with the classified error (LeaseLostError, JournalRejectedError,
   *   JournalUnavailableError)
   * @param {{stepId: string, attempt: number, stepTask?: boolean, log?: {info: Function}}} attempt
   */
  constructor(send, { stepId, attempt, stepTask = false, log }) {
    this._send = send;
    this._stepId = stepId;
    this._attempt = attempt;
    this._stepTask = stepTask;
    this._log = log;
    /** @type {Map<string, {answered: number, queued: import('./payload.js').Payload[]}>} */
    this._streams = new Map();
    this._chunks = 0; // queued over all streams
    this._bytes = 0;
    /** @type {Promise<void> | null} */
    this._sender = null;
    this._closed = false; // flushed: the attempt is over
    this._fenced = false; // history refused a batch: nothing more is sent
    /** @type {Error | null} why sending stopped, thrown by flush() */
    this._error = null;
  }

  /**
   * Queue `chunk` (a JSON value; a string for text) on `stream`.
   * @param {any} chunk
   * @param {string} [stream]
   */
  emit(chunk, stream = DEFAULT_STREAM) {
    checkStream(stream);
    const payload = toPayload(chunk);
    if (payload.encoding === BINARY_ENCODING) throw new TypeError('a chunk is a JSON value (a string for text), not bytes');
    const size = payload.data.length;
    if (size > MAX_CHUNK_BYTES) throw new RangeError(`the chunk is ${size} bytes encoded; the limit is ${MAX_CHUNK_BYTES} bytes`);
    if (this._closed) {
      throw new PerdureError(`attempt ${this._attempt} of step '${this._stepId}' is over: its frames were flushed and no more can be emitted`);
    }
    if (this._fenced) return; // the attempt's own record will be refused as well
    if (this._error) throw this._error;
    if (this._chunks >= MAX_BUFFERED_CHUNKS || this._bytes >= MAX_BUFFERED_BYTES) {
      throw new StreamBufferFullError(
        `${this._chunks} chunks (${this._bytes} bytes) emitted by step '${this._stepId}' are not yet stored by history (the limits are ${MAX_BUFFERED_CHUNKS} chunks and ${MAX_BUFFERED_BYTES} bytes): emit less often, or larger chunks`,
      );
    }
    let queue = this._streams.get(stream);
    if (!queue) this._streams.set(stream, (queue = { answered: 0, queued: [] }));
    queue.queued.push(payload);
    this._chunks += 1;
    this._bytes += size;
    if (!this._sender) this._sender = this._sendAll();
  }

  /**
   * Wait until every chunk emitted so far is stored, then refuse later ones. Rejects with
   * JournalUnavailableError when history could not be reached, JournalRejectedError when it
   * refused a batch as invalid; resolves when the attempt was fenced out (its record will be
   * refused too).
   */
  async flush() {
    this._closed = true;
    if (this._sender) await this._sender;
    if (this._error) throw this._error;
  }

  /** Send batches until nothing is queued: one batch per stream at a time. */
  async _sendAll() {
    try {
      await Promise.resolve(); // chunks emitted in this same turn go in the first batch
      for (;;) {
        const pending = [...this._streams.entries()].filter(([, queue]) => queue.queued.length);
        if (!pending.length || this._fenced || this._error) return;
        const outcomes = await Promise.allSettled(pending.map(([name, queue]) => this._sendBatch(name, queue, nextBatch(queue.queued))));
        for (const outcome of outcomes) {
          if (outcome.status === 'fulfilled') continue;
          if (outcome.reason instanceof LeaseLostError) {
            this._log?.info?.(`frames of step ${this._stepId} attempt ${this._attempt} refused: ${outcome.reason.message}`);
            this._stop(null);
          } else {
            this._stop(outcome.reason instanceof Error ? outcome.reason : new JournalUnavailableError(String(outcome.reason)));
          }
        }
      }
    } finally {
      this._sender = null;
    }
  }

  /**
   * @param {string} stream
   * @param {{answered: number, queued: import('./payload.js').Payload[]}} queue
   * @param {import('./payload.js').Payload[]} chunks
   */
  async _sendBatch(stream, queue, chunks) {
    const request = { step_id: this._stepId, attempt: this._attempt, stream, first_index: queue.answered, chunks, step_task: this._stepTask };
    for (let resend = 0; ; resend++) {
      try {
        await this._send(request);
        break;
      } catch (error) {
        // The session sent it again a few times already; history stores a batch once.
        if (!(error instanceof JournalUnavailableError) || resend === RESENDS) throw error;
        await new Promise((resolve) => setTimeout(resolve, RESEND_BACKOFF_MS * 2 ** resend));
      }
    }
    if (this._fenced || this._error) return; // the queues were dropped
    queue.queued.splice(0, chunks.length);
    queue.answered += chunks.length;
    this._chunks -= chunks.length;
    this._bytes -= chunks.reduce((sum, chunk) => sum + chunk.data.length, 0);
  }

  /** Send nothing more: fenced out (`error` null) or failed with `error`. */
  _stop(error) {
    if (error === null) this._fenced = true;
    else this._error ??= error;
    for (const queue of this._streams.values()) queue.queued.length = 0;
    this._chunks = 0;
    this._bytes = 0;
  }
}

/**
 * The next batch of a stream's queue (within the batch bounds, at least one chunk).
 * @param {import('./payload.js').Payload[]} queued
 */
function nextBatch(queued) {
  let size = 0;
  let taken = 0;
  for (const chunk of queued) {
    size += chunk.data.length;
    if (taken && (size > MAX_BATCH_BYTES || taken >= MAX_BATCH_CHUNKS)) break;
    taken += 1;
  }
  return queued.slice(0, taken);
}

/** @param {unknown} stream */
function checkStream(stream) {
  if (typeof stream !== 'string' || !stream) throw new TypeError(`a stream name is a non-empty string, not ${JSON.stringify(stream)}`);
  // eslint-disable-next-line no-control-regex
  if ([...stream].length > MAX_STREAM_NAME || /[\u0000-\u001f\u007f-\u009f]/.test(stream)) {
    throw new RangeError(`stream name ${JSON.stringify(stream.slice(0, 50))} is not 1 to ${MAX_STREAM_NAME} printable characters`);
  }
}
