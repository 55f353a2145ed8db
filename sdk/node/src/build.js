// The worker's build id (Hello.build_id): the operator's (`buildId`, PERDURE_BUILD_ID), or
// derived from the source of the registered workflow and step functions, so that a change to
// their code is a new build. Routing policies send a type's runs to the right build
// (docs/worker-protocol.md §23).

import crypto from 'node:crypto';

export const MAX_BUILD_ID = 64;
const DERIVED_LENGTH = 12; // hex digits of the SHA-256

/**
 * The build id to declare: `explicit`, else PERDURE_BUILD_ID, else derived from `functions`.
 * @param {string | undefined} explicit
 * @param {Map<string, Function>} functions the registered functions by type name
 */
export function buildIdOf(explicit, functions) {
  const chosen = explicit ?? process.env.PERDURE_BUILD_ID;
  if (chosen) {
    if (typeof chosen !== 'string' || chosen.length > MAX_BUILD_ID || chosen !== chosen.trim() || /\p{C}/u.test(chosen)) {
      throw new TypeError(`buildId must be at most ${MAX_BUILD_ID} printable characters with no space at either end`);
    }
    return chosen;
  }
  return derivedBuildId(functions);
}

/**
 * 12 hex digits of the SHA-256 over each registered function's name and source text, in name
 * order. A function's source is what JavaScript shows of it: helpers it calls from elsewhere
 * are not part of it, so set a build id explicitly when those change alone.
 * @param {Map<string, Function>} functions
 */
export function derivedBuildId(functions) {
  const digest = crypto.createHash('sha256');
  for (const name of [...functions.keys()].sort()) {
    digest.update(`${name}\0${String(functions.get(name))}\0`);
  }
  return digest.digest('hex').slice(0, DERIVED_LENGTH);
}
