// Model calls as steps (worker-protocol.md §32): the request a workflow's `ctx.modelCall`
// journals, the estimate it reserves, and `modelStep`, the remote step that sends the request to
// any OpenAI-compatible client and reports the model, tokens and cost it used.

import { checkKey } from './flow.js';
import { checkPrices, tokensCost, usageFromModelResponse } from './usage.js';

/** The remote step type a model call schedules by default, and modelStep serves. */
export const MODEL_STEP = 'model_call';
// What a chat format adds per message (role, separators) and per reply, at most, in tokens.
const MESSAGE_OVERHEAD_TOKENS = 4;
const REPLY_OVERHEAD_TOKENS = 3;
const MAX_OUTPUT_TOKENS = 2 ** 31 - 1;
// Parameters the call's own arguments set, and streaming, which a step's one result cannot be.
const RESERVED_PARAMS = ['model', 'messages', 'max_tokens', 'stream'];

/**
 * A model call's request as the step's JSON input, checked: TypeError or RangeError for what a
 * provider would refuse or a step could not carry.
 * @param {unknown} model
 * @param {unknown} messages
 * @param {unknown} maxTokens
 * @param {Record<string, unknown>} params
 * @returns {{model: string, messages: Record<string, unknown>[], max_tokens: number, params: Record<string, unknown>}}
 */
export function modelRequest(model, messages, maxTokens, params = {}) {
  checkKey('model', model);
  if (!model) throw new RangeError("model must name the model, e.g. 'gpt-4o-mini'");
  if (!Array.isArray(messages) || messages.length === 0) throw new TypeError("messages must be a non-empty array of {role, content}");
  messages.forEach((message, index) => {
    if (typeof message !== 'object' || message === null || typeof message.role !== 'string') {
      throw new TypeError(`messages[${index}] must be an object with a string 'role': ${JSON.stringify(message)}`);
    }
  });
  if (!Number.isInteger(maxTokens)) throw new TypeError(`maxTokens must be an integer, not ${maxTokens}`);
  if (/** @type {number} */ (maxTokens) < 1 || /** @type {number} */ (maxTokens) > MAX_OUTPUT_TOKENS) {
    throw new RangeError(`maxTokens must be from 1 to ${MAX_OUTPUT_TOKENS}, not ${maxTokens}`);
  }
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw new TypeError('params must be an object of the API\'s other parameters');
  const reserved = RESERVED_PARAMS.filter((name) => Object.hasOwn(params, name));
  if (reserved.length > 0) {
    throw new RangeError(`${reserved.join(', ')} cannot be passed in params: model, messages and maxTokens are the call's own arguments, and a step's result is not a stream`);
  }
  return { model: /** @type {string} */ (model), messages: messages.map((m) => ({ ...m })), max_tokens: /** @type {number} */ (maxTokens), params: { ...params } };
}

/**
 * At most how many tokens `messages` make: a byte-level tokenizer's token is at least one byte
 * of text, so each message's UTF-8 bytes (its values as compact JSON) plus the format's
 * overhead bound it. Not a bound for non-text content (images): declare the estimate for those.
 * @param {Record<string, unknown>[]} messages
 * @returns {number}
 */
export function promptTokensBound(messages) {
  let bytes = 0;
  for (const message of messages) {
    for (const value of Object.values(message)) bytes += Buffer.byteLength(JSON.stringify(value), 'utf8');
  }
  return bytes + MESSAGE_OVERHEAD_TOKENS * messages.length + REPLY_OVERHEAD_TOKENS;
}

/**
 * The most a call may use: its prompt's bound plus max_tokens, and at `prices` their cost
 * (rounded up), so that budgets reserve no less than the call can spend.
 * @param {{messages: Record<string, unknown>[], max_tokens: number}} request
 * @param {{inputMicrosPerMillion: number | bigint, outputMicrosPerMillion: number | bigint}} [prices]
 * @returns {{units: bigint, costMicros: bigint}}
 */
export function modelEstimate(request, prices) {
  const prompt = BigInt(promptTokensBound(request.messages));
  const completion = BigInt(request.max_tokens);
  let costMicros = 0n;
  if (prices !== undefined && prices !== null) {
    const { input, output } = checkPrices(prices);
    costMicros = tokensCost(prompt, input) + tokensCost(completion, output);
  }
  return { units: prompt + completion, costMicros };
}

/**
 * The remote step that answers `ctx.modelCall`, for a Worker's `steps` (under MODEL_STEP): it
 * sends each request to `client.chat.completions.create({model, messages, max_tokens,
 * ...params})` (any OpenAI-compatible client: the `openai` package's, or an offline one),
 * returns the response as JSON, and reports the model and tokens it used and their cost at
 * `prices` (one price for every model, or prices by model name; none: tokens only). The report
 * settles the call's reserved estimate and is journaled with the step.
 * @param {{chat: {completions: {create: (request: object) => any}}}} client
 * @param {{inputMicrosPerMillion: number | bigint, outputMicrosPerMillion: number | bigint} | Record<string, {inputMicrosPerMillion: number | bigint, outputMicrosPerMillion: number | bigint}>} [prices]
 * @returns {(request: any, info: import('./step-info.js').StepInfo) => Promise<any>}
 */
export function modelStep(client, prices) {
  if (typeof client?.chat?.completions?.create !== 'function') {
    throw new TypeError('client must be OpenAI-compatible: client.chat.completions.create(request)');
  }
  return async (request, info) => {
    const response = await client.chat.completions.create({
      model: request.model,
      messages: request.messages,
      max_tokens: request.max_tokens,
      ...(request.params ?? {}),
    });
    const answer = typeof response?.toJSON === 'function' ? response.toJSON() : response;
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
      throw new TypeError(`the model client answered ${typeof answer}, not an OpenAI-compatible response object`);
    }
    const model = typeof answer.model === 'string' && answer.model ? answer.model : request.model;
    const price = priceOf(prices, model) ?? { inputMicrosPerMillion: 0, outputMicrosPerMillion: 0 };
    const usage = usageFromModelResponse(answer, price);
    info.reportUsage({ ...usage, model });
    return answer;
  };
}

/**
 * The text of a chat completion's first choice ('' when it has none).
 * @param {any} response
 * @returns {string}
 */
export function modelText(response) {
  const content = response?.choices?.[0]?.message?.content;
  return typeof content === 'string' ? content : '';
}

/**
 * @param {any} prices
 * @param {string} model
 */
function priceOf(prices, model) {
  if (prices === undefined || prices === null) return null;
  if ('inputMicrosPerMillion' in prices) return prices;
  return prices[model] ?? null;
}
