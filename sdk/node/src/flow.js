// Flow control's values (worker-protocol.md §27): concurrency keys, usage and budgets,
// checked here once for workflow code (ctx.call) and the client (start), before anything is
// sent. Amounts are int64: BigInt or safe integers; a Number past 2^53 is already inexact.

/** The contract's limits (flow.proto): keys per run or step, characters per key, int64. */
export const MAX_KEYS = 8;
export const MAX_KEY_LENGTH = 200;
const INT64_LIMIT = 2n ** 63n;
// Printable as Python's str.isprintable: no "other" (controls, format, unassigned...) and no
// separator characters but the ASCII space.
const UNPRINTABLE = /(?! )[\p{C}\p{Z}]/u;

/**
 * `value` (a BigInt or a safe integer, >= 0 and < 2^63) as int64 for a proto field: a safe
 * integer as it is, a BigInt as its decimal string (protobufjs reads both exactly).
 * @param {string} what
 * @param {unknown} value
 * @returns {number | string}
 */
export function checkAmount(what, value) {
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new TypeError(`${what} must be an integer or a BigInt, not ${value}`);
    if (!Number.isSafeInteger(value)) throw new RangeError(`${what} is past 2^53 as a Number and no longer exact: pass a BigInt`);
  } else if (typeof value !== 'bigint') {
    throw new TypeError(`${what} must be an integer or a BigInt, not ${typeof value}`);
  }
  const big = BigInt(value);
  if (big < 0n || big >= INT64_LIMIT) throw new RangeError(`${what} must be >= 0 and < 2^63, not ${big}`);
  return typeof value === 'bigint' ? big.toString() : value;
}

/**
 * A key (or fairness key): at most 200 printable characters.
 * @param {string} what
 * @param {unknown} key
 * @returns {string}
 */
export function checkKey(what, key) {
  if (typeof key !== 'string') throw new TypeError(`${what} must be a string, not ${typeof key}`);
  if ([...key].length > MAX_KEY_LENGTH || UNPRINTABLE.test(key)) { // code points, as Python counts
    throw new RangeError(`${what} must be at most ${MAX_KEY_LENGTH} printable characters: ${JSON.stringify(key)}`);
  }
  return key;
}

/**
 * Concurrency and rate keys: at most 8, each 1 to 200 printable characters, no two alike.
 * @param {unknown} keys
 * @returns {string[]}
 */
export function checkKeys(keys) {
  if (keys === undefined || keys === null) return [];
  if (!Array.isArray(keys)) throw new TypeError(`keys must be an array of strings, not ${typeof keys}`);
  if (keys.length > MAX_KEYS) throw new RangeError(`at most ${MAX_KEYS} keys, not ${keys.length}`);
  const checked = keys.map((key) => checkKey('a key', key));
  if (checked.includes('')) throw new RangeError('a key must not be empty');
  if (new Set(checked).size !== checked.length) throw new RangeError(`keys must not repeat: ${JSON.stringify(checked)}`);
  return checked;
}

/**
 * A Usage message from `{units, costMicros}` (each defaults to 0).
 * @param {unknown} usage
 * @param {string} [what]
 * @returns {{units: number | string, cost_micros: number | string}}
 */
export function usageMessage(usage, what = 'usage') {
  if (typeof usage !== 'object' || usage === null) throw new TypeError(`${what} must be an object {units, costMicros}`);
  const { units = 0, costMicros = 0 } = /** @type {{units?: unknown, costMicros?: unknown}} */ (usage);
  return { units: checkAmount(`${what}.units`, units), cost_micros: checkAmount(`${what}.costMicros`, costMicros) };
}

/**
 * A Budget message from `{units?, costMicros?}`: a field left out is no limit on it.
 * @param {unknown} budget
 * @returns {{units?: number | string, cost_micros?: number | string}}
 */
export function budgetMessage(budget) {
  if (typeof budget !== 'object' || budget === null) throw new TypeError('budget must be an object {units?, costMicros?}');
  const { units, costMicros } = /** @type {{units?: unknown, costMicros?: unknown}} */ (budget);
  /** @type {{units?: number | string, cost_micros?: number | string}} */
  const message = {};
  if (units !== undefined && units !== null) message.units = checkAmount('budget.units', units);
  if (costMicros !== undefined && costMicros !== null) message.cost_micros = checkAmount('budget.costMicros', costMicros);
  return message;
}

/**
 * A remote step's flow settings (ScheduleStepRequest.flow), or null when it declares none.
 * @param {unknown} keys
 * @param {unknown} estimate
 */
export function stepFlow(keys, estimate) {
  const checked = checkKeys(keys);
  const hasEstimate = estimate !== undefined && estimate !== null;
  if (!checked.length && !hasEstimate) return null;
  return { keys: checked, estimate: hasEstimate ? usageMessage(estimate, 'estimate') : null };
}

/** onBudgetExceeded's values, as RunFlow.on_budget_exceeded. */
const BUDGET_EXCEEDED_ACTIONS = new Map([
  ['wait', 'BUDGET_EXCEEDED_ACTION_WAIT'],
  ['fail', 'BUDGET_EXCEEDED_ACTION_FAIL'],
]);

/**
 * A run's flow settings (StartWorkflowRequest.flow), or null when it declares none (priority
 * 3, fairness key "", no budget). TypeError or RangeError for a value the contract refuses.
 * @param {{keys?: string[], priority?: number, fairnessKey?: string,
 *   budget?: {units?: number | bigint, costMicros?: number | bigint}, onBudgetExceeded?: 'wait' | 'fail'}} options
 */
export function runFlow({ keys, priority, fairnessKey, budget, onBudgetExceeded } = {}) {
  /** @type {Record<string, any>} */
  const flow = {};
  const checked = checkKeys(keys);
  if (checked.length) flow.keys = checked;
  if (priority !== undefined && priority !== null) {
    if (!Number.isInteger(priority)) throw new TypeError(`priority must be an integer, not ${String(priority)}`);
    if (priority < 1 || priority > 5) throw new RangeError(`priority must be 1 (served first) to 5 (served last), not ${priority}`);
    flow.priority = priority;
  }
  if (fairnessKey !== undefined && fairnessKey !== null) flow.fairness_key = checkKey('fairnessKey', fairnessKey);
  if (budget !== undefined && budget !== null) flow.budget = budgetMessage(budget);
  if (onBudgetExceeded !== undefined && onBudgetExceeded !== null) {
    const action = BUDGET_EXCEEDED_ACTIONS.get(onBudgetExceeded);
    if (!action) throw new RangeError(`onBudgetExceeded must be 'wait' or 'fail', not ${JSON.stringify(onBudgetExceeded)}`);
    flow.on_budget_exceeded = action;
  }
  return Object.keys(flow).length ? flow : null;
}
