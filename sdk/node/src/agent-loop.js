// Standing objectives: a durable agent loop that people steer with signals, and that stops with
// a reason when its objective is met, it is abandoned, or its turns or budget run out
// (worker-protocol.md §31).

import { checkName } from './context.js';

/** Why a loop stopped. */
export const STOP_REASONS = Object.freeze(['met', 'abandoned', 'out_of_budget', 'max_turns']);

/**
 * @typedef {{number: number, objective: any, state: any, guidance: readonly any[], spent: number,
 *   carry: () => {objective: any, state: any, turns: number, spent: number, guidance: any[]}}} Turn
 *   what a turn works from: its number (from 1, across continueAsNew), the objective as steered,
 *   the last turn's state (null before the first), all guidance received, units spent so far;
 *   `carry()` is the loop before this turn, for `resume` in the next run
 * @typedef {{reason: string, turns: number, objective: any, state: any, spent: number, guidance: any[]}} AgentLoopResult
 * @typedef {{objective: any, maxTurns: number, isMet?: (state: any) => boolean, budget?: number | null,
 *   steeringSignal?: string, abandonSignal?: string, stateKey?: string, resume?: object | null}} AgentLoopOptions
 */

/**
 * Run `takeTurn(turn)` (it resolves with `{state, units}`) until a reason to stop, checked
 * before each turn in this order: `abandonSignal` received ("abandoned"), `isMet(state)` after
 * a turn ("met"), the units reported reach `budget` ("out_of_budget"), `maxTurns` taken
 * ("max_turns"). Signals `steeringSignal` received meanwhile change the objective or add
 * guidance for the next turn; progress is published with setState under `stateKey`.
 * @param {import('./context.js').WorkflowContext} ctx
 * @param {(turn: Turn) => Promise<{state: any, units?: number}>} takeTurn
 * @param {AgentLoopOptions} options
 * @returns {Promise<AgentLoopResult>}
 */
export async function runAgentLoop(ctx, takeTurn, options) {
  const { objective, maxTurns, isMet = null, budget = null, steeringSignal = 'steer', abandonSignal = 'abandon', stateKey = 'objective', resume = null } = options ?? {};
  checkOptions(takeTurn, maxTurns, isMet, budget);
  checkName(steeringSignal, 'steeringSignal');
  checkName(abandonSignal, 'abandonSignal');
  const loop = startLoop(objective, resume);
  const published = (status) => ({ objective: loop.objective, status, turns: loop.turns, max_turns: maxTurns, spent: loop.spent, budget });
  for (;;) {
    const reason = await stopReason(ctx, loop, abandonSignal, isMet, budget, maxTurns);
    if (reason !== null) {
      await ctx.setState(stateKey, published(reason));
      return { reason, turns: loop.turns, objective: loop.objective, state: loop.state, spent: loop.spent, guidance: [...loop.guidance] };
    }
    steer(loop, await ctx.drainSignals(steeringSignal));
    await ctx.setState(stateKey, published('running'));
    const done = await takeTurn(turnOf(loop));
    if (done === null || typeof done !== 'object' || !('state' in done)) {
      throw new TypeError(`a turn must resolve with {state, units}, not ${JSON.stringify(done)}`);
    }
    const units = done.units ?? 0;
    if (!Number.isSafeInteger(units) || units < 0) throw new RangeError(`a turn's units must be a whole number >= 0, not ${units}`);
    loop.turns += 1;
    loop.spent += units;
    loop.state = done.state;
  }
}

/** The loop's running values: all from journaled values, so a replay rebuilds them. */
function startLoop(objective, resume) {
  if (resume === null || resume === undefined) return { objective, state: null, turns: 0, spent: 0, guidance: [] };
  if (typeof resume !== 'object' || Array.isArray(resume)) throw new TypeError('resume takes what turn.carry() gave');
  const turns = resume.turns ?? 0;
  const spent = resume.spent ?? 0;
  if (!(Number.isSafeInteger(turns) && turns >= 0 && Number.isSafeInteger(spent) && spent >= 0)) {
    throw new RangeError(`resume needs whole turns and spent >= 0: ${JSON.stringify(resume)}`);
  }
  const steered = 'objective' in resume ? resume.objective : objective;
  return { objective: steered, state: resume.state ?? null, turns, spent, guidance: [...(resume.guidance ?? [])] };
}

/** Take people's steering, oldest first: {objective} replaces the objective, {guidance} adds
 * guidance (a message may hold both); any other value is a new objective. */
function steer(loop, messages) {
  for (const message of messages) {
    const isObject = message !== null && typeof message === 'object' && !Array.isArray(message);
    if (isObject && ('objective' in message || 'guidance' in message)) {
      if ('objective' in message) loop.objective = message.objective;
      if ('guidance' in message) loop.guidance.push(message.guidance);
    } else {
      loop.objective = message;
    }
  }
}

/** @returns {Turn} */
function turnOf(loop) {
  const { objective, state, turns, spent } = loop;
  const guidance = Object.freeze([...loop.guidance]);
  const carry = () => ({ objective, state, turns, spent, guidance: [...guidance] });
  return Object.freeze({ number: turns + 1, objective, state, guidance, spent, carry });
}

/** Between turns: abandoned, met (after a turn), out of budget, out of turns; else null. */
async function stopReason(ctx, loop, abandonSignal, isMet, budget, maxTurns) {
  if ((await ctx.drainSignals(abandonSignal)).length) return 'abandoned';
  if (isMet !== null && loop.turns > 0 && isMet(loop.state)) return 'met';
  if (budget !== null && loop.spent >= budget) return 'out_of_budget';
  if (loop.turns >= maxTurns) return 'max_turns';
  return null;
}

function checkOptions(takeTurn, maxTurns, isMet, budget) {
  if (typeof takeTurn !== 'function') throw new TypeError('agentLoop needs an async function (turn) => ({state, units})');
  if (isMet !== null && typeof isMet !== 'function') throw new TypeError('isMet must be a function of the state');
  if (!Number.isSafeInteger(maxTurns) || maxTurns < 1) throw new RangeError(`maxTurns must be a whole number >= 1, not ${maxTurns}`);
  if (budget !== null && (!Number.isSafeInteger(budget) || budget < 0)) {
    throw new RangeError(`budget must be a whole number of units >= 0 or null, not ${budget}`);
  }
}
