// JournalService calls: unary, each retried on UNAVAILABLE (5 sends in all, waiting 0.1, 0.2,
// 0.4, 0.8 s) within a 30 s deadline per call, as the Python SDK's session stream does.

import grpc from '@grpc/grpc-js';
import { JournalCallError } from './errors.js';
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
