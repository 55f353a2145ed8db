// JournalService calls: unary, each retried on UNAVAILABLE (5 sends in all, waiting 0.1, 0.2,
// 0.4, 0.8 s) within a 30 s deadline per call, as the Python SDK's session stream does.

import { JournalCallError, classifyJournalError } from './errors.js';
import { channelCredentials, clientOptions, errorReason, loadProtos, statusName } from './proto.js';

export const JOURNAL_TIMEOUT_MS = 30_000;
const ATTEMPTS = 5;
const FIRST_BACKOFF_MS = 100;

/**
 * A client of JournalService. `call(method, request)` resolves with the response or rejects
 * with JournalCallError carrying the status name and ErrorInfo reason.
 */
export class JournalClient {
  /**
   * @param {string} address
   * @param {string} [apiKey] a worker key, sent with every call
   */
  constructor(address, apiKey) {
    const { JournalService } = loadProtos();
    this._client = new JournalService(address, channelCredentials(), clientOptions(apiKey));
  }

  /**
   * @param {string} method e.g. "RecordStep"
   * @param {object} request
   * @param {{timeoutMs?: number}} [options]
   */
  async call(method, request, { timeoutMs = JOURNAL_TIMEOUT_MS } = {}) {
    const deadline = Date.now() + timeoutMs;
    let backoff = FIRST_BACKOFF_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this._unary(method, request, deadline);
      } catch (error) {
        const code = statusName(/** @type {any} */ (error).code);
        const retryable = code === 'UNAVAILABLE' && attempt < ATTEMPTS && Date.now() + backoff < deadline;
        if (!retryable) {
          throw new JournalCallError(code, /** @type {any} */ (error).details ?? String(error), errorReason(error));
        }
      }
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff *= 2;
    }
  }

  _unary(method, request, deadline) {
    return new Promise((resolve, reject) => {
      this._client[method](request, { deadline }, (error, response) => {
        if (error) reject(error);
        else resolve(response);
      });
    });
  }

  close() {
    this._client.close();
  }
}

/** A promise that never settles: what a call of a stopped run returns. */
export const NEVER = new Promise(() => {});

/**
 * The journal calls of one lease: each carries the lease's workflow id and fence; records go
 * one at a time (heartbeats aside), and an answer saying a cancel was requested is noted.
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
    const sent = this._queue.then(() => (stopped() ? NEVER : this.send(method, request)));
    this._queue = sent.catch(() => {});
    try {
      return await sent;
    } catch (error) {
      throw classifyJournalError(error);
    }
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
