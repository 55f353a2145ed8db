// What a remote step's attempt used (worker-protocol.md §27): the report its TaskDone
// carries, and the usage of an OpenAI-compatible model response in exact integers.

import { checkAmount, usageMessage } from './flow.js';

/**
 * One step task's usage: zero until its handler starts (nothing ran), then the handler's last
 * report, or none (the scheduler counts the whole estimate). Reports after the attempt ended
 * (a body that ignored its abort signal) are ignored: the outcome is recorded already.
 */
export class UsageReport {
  constructor() {
    this._ran = false;
    this._ended = false;
    /** @type {{units: number | string, cost_micros: number | string} | null} */
    this._usage = null;
  }

  /** The handler starts: from now on the attempt counts as having run. */
  start() {
    this._ran = true;
  }

  /** The handler's report (a Usage message); a later one replaces it. */
  report(usage) {
    if (!this._ended) this._usage = usage;
  }

  /** The attempt is over: later reports change nothing. */
  end() {
    this._ended = true;
  }

  /** TaskDone.usage: zero when nothing ran, the report if one came, else null (unset). */
  forTaskDone() {
    if (!this._ran) return { units: 0, cost_micros: 0 };
    return this._usage;
  }
}

const PER_MILLION = 1_000_000n;

/**
 * The usage of one model call, from `response.usage` (`prompt_tokens`, `completion_tokens`,
 * `total_tokens`): `units` the total tokens (prompt + completion when the total is missing),
 * `costMicros` the prompt tokens at the input price plus the completion tokens at the output
 * price, each rounded up to a whole micro. BigInts, exact at any size; pass the result to
 * `info.reportUsage`.
 * @param {any} response an OpenAI-compatible chat or completion response
 * @param {{inputMicrosPerMillion: number | bigint, outputMicrosPerMillion: number | bigint}} prices
 *   millionths of a currency per million tokens (USD 2.50 per million: 2_500_000)
 * @returns {{units: bigint, costMicros: bigint}}
 */
export function usageFromModelResponse(response, prices) {
  if (typeof prices !== 'object' || prices === null) throw new TypeError('prices must be an object {inputMicrosPerMillion, outputMicrosPerMillion}');
  const input = BigInt(checkAmount('prices.inputMicrosPerMillion', prices.inputMicrosPerMillion));
  const output = BigInt(checkAmount('prices.outputMicrosPerMillion', prices.outputMicrosPerMillion));
  const usage = response?.usage;
  if (typeof usage !== 'object' || usage === null) throw new TypeError('the model response has no usage');
  const prompt = tokens(usage, 'prompt_tokens');
  const completion = tokens(usage, 'completion_tokens');
  const total = usage.total_tokens === undefined || usage.total_tokens === null ? prompt + completion : tokens(usage, 'total_tokens');
  const costMicros = cost(prompt, input) + cost(completion, output);
  usageMessage({ units: total, costMicros }); // within int64
  return { units: total, costMicros };
}

/**
 * ceil(tokens * price / 1,000,000), in integers.
 * @param {bigint} tokens
 * @param {bigint} microsPerMillion
 */
function cost(tokens, microsPerMillion) {
  return (tokens * microsPerMillion + PER_MILLION - 1n) / PER_MILLION;
}

/**
 * @param {Record<string, unknown>} usage
 * @param {string} name
 * @returns {bigint}
 */
function tokens(usage, name) {
  const value = usage[name];
  return value === undefined || value === null ? 0n : BigInt(checkAmount(`usage.${name}`, value));
}
