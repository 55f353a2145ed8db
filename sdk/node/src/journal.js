// A worker's journal calls, all on one JournalService.Session stream to history, as the Python
// SDK's (services/worker/src/perdure/worker/_session.py): calls matched to answers by id,
// calls ready together sent in one message, calls cut off by a broken stream sent again on a
// new one, and calls history answered UNAVAILABLE (its database failed them for a passing
// reason) sent again (5 sends in all, waiting 0.1, 0.2, 0.4, 0.8 s, within a 30 s deadline per
// call): journal calls are idempotent.
// One run's call never breaks the stream the others share: a call too large for a message
// fails alone, here. A stream moves after about STREAM_MAX_AGE_MS, so that history replicas
// started later get their share of the workers. And each lease's calls (LeaseJournal).

import { JournalCallError, JournalRejectedError, JournalUnavailableError, PerdureError, classifyJournalError } from './errors.js';
import { MAX_MESSAGE_BYTES, channelCredentials, clientOptions, loadProtos, statusName } from './proto.js';
import { currentCarrier, journalCallSpan } from './telemetry.js';

export const JOURNAL_TIMEOUT_MS = 30_000;
const ATTEMPTS = 5;
const FIRST_BACKOFF_MS = 100;
export const STREAM_MAX_AGE_MS = 300_000;
/** One call of a Session message keeps this much less than a message, for the message around it. */
export const MAX_ITEM_BYTES = MAX_MESSAGE_BYTES - 64 * 1024;

/** The stream ended before the call was answered. */
class StreamBrokenError extends PerdureError {}

/** Whether history answered that the call failed for a passing reason (UNAVAILABLE). */
function passing(answer) {
  return answer.result === 'error' && statusName(Number(answer.error?.code)) === 'UNAVAILABLE';
}

/** "RecordStep" -> "record_step": the call's field in JournalCall and JournalAnswer. */
function fieldOf(method) {
  return method.replace(/[A-Z]/g, (letter, at) => (at ? '_' : '') + letter.toLowerCase());
}

/**
 * One Session stream: the calls waiting to be written, and those waiting for answers.
 * @typedef {{stream: any, outgoing: {call: any, size: number}[], unanswered: Map<number, {resolve: (a: any) => void, reject: (e: Error) => void}>,
 *   flushing: boolean, retireAt: number, retired: boolean, broken: boolean}} Connection
 * @typedef {{connection: Connection | null, id: number, expired: boolean}} Sent  where a call waits for its answer now
 */

/**
 * A client of JournalService over its Session stream. `call(method, request)` resolves with
 * the method's response or rejects with JournalCallError carrying the status name and ErrorInfo
 * reason a unary call would have failed with.
 */
export class JournalClient {
  /**
   * @param {string} address
   * @param {string} [apiKey] a worker key, sent with the stream
   * @param {{maxAgeMs?: number, buildId?: string}} [options] `buildId`: the worker's, which a
   *   run's first load records
   */
  constructor(address, apiKey, { maxAgeMs = STREAM_MAX_AGE_MS, buildId = '' } = {}) {
    const { JournalService } = loadProtos();
    this._client = new JournalService(address, channelCredentials(), clientOptions(apiKey));
    this._serialize = JournalService.service.Session.requestSerialize;
    this._maxAgeMs = maxAgeMs;
    this.buildId = buildId;
    /** @type {Connection | null} */
    this._connection = null;
    this._nextId = 1;
    this._closed = false;
  }

  /**
   * @param {string} method e.g. "RecordStep"
   * @param {object} request
   * @param {{timeoutMs?: number}} [options]
   */
  call(method, request, { timeoutMs = JOURNAL_TIMEOUT_MS } = {}) {
    return journalCallSpan(method, async () => {
      const field = fieldOf(method);
      if (method === 'LoadJournal' && this.buildId) request = { ...request, build_id: this.buildId };
      const call = { id: 0, trace_context: currentCarrier(), [field]: request };
      const size = this._serialize({ calls: [call] }).length;
      if (size > MAX_ITEM_BYTES) {
        // Sent, it would break the stream every other run's calls share.
        throw new JournalCallError('RESOURCE_EXHAUSTED', `${method} is ${size} bytes, over the ${MAX_ITEM_BYTES}-byte message limit`, 'MESSAGE_TOO_LARGE');
      }
      /** @type {Sent} */
      const sent = { connection: null, id: 0, expired: false };
      let answer;
      try {
        answer = await this._withDeadline(this._sendWithRetries({ call, size }, sent), method, timeoutMs);
      } finally {
        sent.expired = true; // no resend after the deadline
        if (sent.connection) this._forget(sent.connection, sent.id); // given up on
      }
      if (answer.result === 'error') {
        const error = answer.error ?? {};
        throw new JournalCallError(statusName(Number(error.code)), error.message ?? '', error.reason ?? '');
      }
      return answer[field];
    });
  }

  /** End the stream; calls still unanswered fail. */
  close() {
    this._closed = true;
    if (this._connection) this._broken(this._connection, 'the journal client was closed');
    this._client.close();
  }

  async _withDeadline(answer, method, timeoutMs) {
    let timer;
    const expired = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new JournalCallError('DEADLINE_EXCEEDED', `no answer to ${method} in ${timeoutMs / 1000}s`)), timeoutMs);
    });
    answer.catch(() => {}); // it may still fail after the deadline: nobody waits for it then
    try {
      return await Promise.race([answer, expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * @param {{call: any, size: number}} item the call, and its size in a message
   * @param {Sent} sent
   */
  async _sendWithRetries(item, sent) {
    let backoff = FIRST_BACKOFF_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await this._send(item, sent);
        if (!passing(answer) || attempt >= ATTEMPTS || this._closed) return answer;
      } catch (error) {
        if (!(error instanceof StreamBrokenError)) throw error;
        if (attempt >= ATTEMPTS || this._closed) throw new JournalCallError('UNAVAILABLE', error.message);
      }
      await new Promise((resolve) => setTimeout(resolve, backoff));
      if (sent.expired) throw new JournalCallError('DEADLINE_EXCEEDED', 'given up on');
      backoff *= 2;
    }
  }

  /**
   * Send a call with a new id on the current stream; resolve with its answer.
   * @param {{call: any, size: number}} item
   * @param {Sent} sent
   */
  _send(item, sent) {
    const connection = this._open();
    const id = this._nextId++;
    sent.connection = connection;
    sent.id = id;
    return new Promise((resolve, reject) => {
      connection.unanswered.set(id, { resolve, reject });
      connection.outgoing.push({ call: { ...item.call, id }, size: item.size });
      if (!connection.flushing) {
        // Calls made until the next turn of the event loop go together in one message.
        connection.flushing = true;
        setImmediate(() => this._write(connection));
      }
    });
  }

  /** @returns {Connection} */
  _open() {
    const old = this._connection;
    if (old && Date.now() >= old.retireAt) {
      this._connection = null;
      this._retire(old);
    }
    if (!this._connection) {
      const stream = this._client.Session();
      /** @type {Connection} */
      const connection = {
        stream,
        outgoing: [],
        unanswered: new Map(),
        flushing: false,
        // Give or take a tenth, so that streams opened together do not all move together.
        retireAt: Date.now() + this._maxAgeMs * (0.9 + Math.random() * 0.2),
        retired: false,
        broken: false,
      };
      stream.on('data', (message) => {
        for (const answer of message.answers ?? []) {
          const waiting = connection.unanswered.get(Number(answer.id));
          if (!waiting) continue;
          waiting.resolve(answer);
        }
        this._endIfRetired(connection);
      });
      stream.on('error', (error) =>
        this._broken(connection, `the journal stream to history broke: ${statusName(error?.code)}: ${error?.details ?? error?.message}`),
      );
      stream.on('end', () => this._broken(connection, 'history closed the journal stream'));
      this._connection = connection;
    }
    return this._connection;
  }

  /** Write the calls waiting: as many per message as fit the message limit. */
  _write(connection) {
    connection.flushing = false;
    while (connection.outgoing.length && !connection.broken) {
      const calls = this._nextMessage(connection.outgoing);
      try {
        connection.stream.write({ calls });
      } catch {
        this._broken(connection, 'the journal stream to history broke');
        return;
      }
    }
    this._endIfRetired(connection);
  }

  _nextMessage(outgoing) {
    let room = MAX_ITEM_BYTES;
    let taken = 0;
    for (const { size } of outgoing) {
      room -= size;
      if (taken && room < 0) break;
      taken += 1;
    }
    return outgoing.splice(0, taken).map(({ call }) => call);
  }

  /** The call `id` is answered or given up on: no longer waited for on `connection`. */
  _forget(connection, id) {
    connection.unanswered.delete(id);
    this._endIfRetired(connection);
  }

  /** A stream that takes no new calls: half-closed once its calls are written and answered. */
  _retire(connection) {
    connection.retired = true;
    this._endIfRetired(connection);
  }

  _endIfRetired(connection) {
    if (!connection.retired || connection.broken || connection.outgoing.length || connection.unanswered.size) return;
    connection.broken = true;
    try {
      connection.stream.end(); // history then ends it
    } catch {
      // already closed
    }
  }

  /** Give up on a stream: its unanswered calls fail (to be sent again on a new one). */
  _broken(connection, reason) {
    if (this._connection === connection) this._connection = null;
    const wasBroken = connection.broken;
    connection.broken = true;
    connection.outgoing.length = 0;
    for (const waiting of connection.unanswered.values()) waiting.reject(new StreamBrokenError(reason));
    connection.unanswered.clear();
    if (!wasBroken) {
      try {
        connection.stream.cancel();
      } catch {
        // already closed
      }
    }
  }
}

/** A promise that never settles: what a call of a stopped run returns. */
export const NEVER = new Promise(() => {});

/**
 * The journal calls of one lease: each carries the lease's workflow id and fence; records go
 * one at a time (heartbeats aside), and an answer saying a cancel was requested is noted.
 *
 * A step's output may go ahead of its answer (`recordAhead`): the code goes on at once, an
 * attempt's start is sent right after it (in the same message) without waiting, and waits for
 * the output's answer before it returns; any other record waits for that answer before it is
 * sent. Nothing the code does in between leaves the worker, and the output's error, if any, is
 * raised at the lease's next record (or by `settle`, before the run is finished or suspended).
 */
export class LeaseJournal {
  /**
   * @param {{call: (method: string, request: object) => Promise<any>}} journal
   * @param {string} workflowId
   * @param {number} fence
   * @param {() => void} onCancelRequested
   */
  constructor(journal, workflowId, fence, onCancelRequested) {
    this._journal = journal;
    this._workflowId = workflowId;
    this._fence = fence;
    this._onCancelRequested = onCancelRequested;
    this._queue = Promise.resolve();
    /** @type {Promise<any>[]} outputs sent ahead, their answers not yet waited for */
    this._ahead = [];
  }

  /** Whether outputs sent ahead are waiting for their answers. */
  get sendingAhead() {
    return this._ahead.length > 0;
  }

  /**
   * Send a record after the ones before it; one sent once `stopped()` is true never settles.
   * Rejects with the classified error (LeaseLostError, JournalRejectedError,
   * JournalUnavailableError).
   * @param {string} method
   * @param {object} request
   * @param {() => boolean} stopped
   */
  async record(method, request, stopped) {
    const beside = method === 'RecordStep' && Boolean(request.attempt_started);
    const ahead = this._ahead.length ? this.settle() : null;
    ahead?.catch(() => {}); // raised below, by this record
    // An attempt's start goes beside the outputs sent ahead; any other record after them.
    const after = beside || !ahead ? this._queue : this._queue.then(() => ahead);
    const sent = after.then(() => (stopped() ? NEVER : this.send(method, request)));
    this._queue = sent.catch(() => {});
    try {
      const response = await sent;
      if (beside && ahead) await ahead;
      return response;
    } catch (error) {
      throw classifyJournalError(error);
    }
  }

  /**
   * Send a step's output now, right after the records before it, without waiting for its
   * answer; resolves with the answer. The lease's next record is sent right after it.
   * @param {object} request a RecordStep request with its output
   * @param {() => boolean} stopped
   */
  recordAhead(request, stopped) {
    const answer = this._queue
      .then(() => (stopped() ? NEVER : this.send('RecordStep', request)))
      .catch((error) => {
        const classified = classifyJournalError(error);
        if (!(classified instanceof JournalRejectedError)) throw classified;
        // surelyAccepted should have kept it back: it cannot be failed as a step any more
        throw new JournalUnavailableError(`an output sent ahead was refused: ${classified.message}`);
      });
    answer.catch(() => {}); // raised by the next record or settle(), or never if the run is dropped
    this._ahead.push(answer);
    // Callbacks on one promise run in order: the next record's send follows this one's.
    this._queue = this._queue.then(() => {});
    return answer;
  }

  /** Wait for the outputs sent ahead; reject with the first one's error. */
  async settle() {
    const ahead = this._ahead.splice(0);
    for (const answer of ahead) await answer;
  }

  /**
   * Send one journal call of this lease now.
   * @param {string} method
   * @param {object} request
   */
  async send(method, request) {
    const response = await this._journal.call(method, { ...request, workflow_id: this._workflowId, fence: this._fence });
    if (response?.cancel_requested) this._onCancelRequested();
    return response;
  }
}
