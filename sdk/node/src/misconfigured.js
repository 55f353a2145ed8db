// Which failures to reach the services mean the worker is misconfigured (it stops, saying what
// to fix) rather than that a service is down for now (it retries).

import dns from 'node:dns';
import grpc from '@grpc/grpc-js';
import { WorkerConfigurationError } from './errors.js';
import { statusName } from './proto.js';

/** gRPC target schemes that name no host to resolve. */
const UNRESOLVED_SCHEMES = new Set(['ipv4', 'ipv6', 'unix', 'unix-abstract', 'vsock']);
/** What to fix, per answer that no retry can change. */
const FIXES = new Map([
  [grpc.status.UNAUTHENTICATED, 'give the worker a valid, unrevoked worker key in PERDURE_API_KEY (or the apiKey option)'],
  [grpc.status.PERMISSION_DENIED, 'use a worker key of this namespace whose queues include this task queue'],
]);

/**
 * The host name a gRPC target resolves, or null when it names addresses directly.
 * @param {string} address
 */
export function hostOf(address) {
  let target = address;
  if (target.startsWith('dns:')) {
    target = target.slice(4).replace(/^\/+/, '');
    target = target.slice(target.lastIndexOf('/') + 1);
  } else if (UNRESOLVED_SCHEMES.has(target.split(':')[0])) {
    return null;
  }
  if (target.startsWith('[')) return target.slice(1, target.indexOf(']'));
  const colon = target.lastIndexOf(':');
  return colon === -1 ? target : target.slice(0, colon);
}

/**
 * Reject with WorkerConfigurationError if the host name of `address` does not exist (a DNS
 * server that did not answer in time, EAI_AGAIN, is worth retrying).
 * @param {string} address
 * @param {string} what
 */
export async function checkResolves(address, what) {
  const host = hostOf(address);
  if (!host) return;
  try {
    await dns.promises.lookup(host);
  } catch (error) {
    if (error?.code === 'ENOTFOUND') {
      throw new WorkerConfigurationError(
        `${what} address '${address}' does not resolve (${error.code}): check the address (PERDURE_SCHEDULER_ADDRESS / PERDURE_HISTORY_ADDRESS)`,
      );
    }
  }
}

/**
 * The configuration error a gRPC failure reveals, or null if it may pass (UNAVAILABLE...).
 * @param {any} error
 * @param {string} what
 * @param {string} address
 */
export function permanent(error, what, address) {
  const fix = FIXES.get(error?.code);
  if (!fix) return null;
  return new WorkerConfigurationError(
    `${what} at ${address} refused this worker: ${statusName(error.code)}: ${error.details ?? error.message}; ${fix}`,
  );
}
