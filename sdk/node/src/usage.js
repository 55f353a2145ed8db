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
    this._model = '';
  }

  /** The handler starts: from now on the attempt counts as having run. */
  start() {
    this._ran = true;
  }

  /**
   * The handler's report (a Usage message, and the model that answered, for a model call); a
   * later one replaces it.
   * @param {{units: number | string, cost_micros: number | string}} usage
   * @param {string} [model]
   */
  report(usage, model = '') {
    if (this._ended) return;
    this._usage = usage;
    this._model = model;
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

  /** RecordStepRequest.usage: the report with its model (§32); null when none came. */
  forJournal() {
    return this._usage === null ? null : { usage: this._usage, model: this._model };
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
  const { input, output } = checkPrices(prices);
  const usage = response?.usage;
  if (typeof usage !== 'object' || usage === null) throw new TypeError('the model response has no usage');
  const prompt = tokens(usage, 'prompt_tokens');
  const completion = tokens(usage, 'completion_tokens');
  const total = usage.total_tokens === undefined || usage.total_tokens === null ? prompt + completion : tokens(usage, 'total_tokens');
  const costMicros = tokensCost(prompt, input) + tokensCost(completion, output);
  usageMessage({ units: total, costMicros }); // within int64
  return { units: total, costMicros };
}

/**
 * Prices checked, as BigInts.
 * @param {unknown} prices
 * @returns {{input: bigint, output: bigint}}
 */
export function checkPrices(prices) {
  if (typeof prices !== 'object' || prices === null) throw new TypeError('prices must be an object {inputMicrosPerMillion, outputMicrosPerMillion}');
  const { inputMicrosPerMillion, outputMicrosPerMillion } = /** @type {any} */ (prices);
  return {
    input: BigInt(checkAmount('prices.inputMicrosPerMillion', inputMicrosPerMillion)),
    output: BigInt(checkAmount('prices.outputMicrosPerMillion', outputMicrosPerMillion)),
  };
}

/**
 * ceil(tokens * price / 1,000,000), in integers.
 * @param {bigint} tokens
 * @param {bigint} microsPerMillion
 */
export function tokensCost(tokens, microsPerMillion) {
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
