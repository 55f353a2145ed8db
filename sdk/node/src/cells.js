/**
 * Cells: several databases, each with its own scheduler and history. A worker given several
 * serves each with a session of its own, so a cell that is down costs only its own runs.
 * PERDURE_CELLS spells them as the gateway's does: `name=history_address/scheduler_address`
 * entries separated by ';' (a gRPC target may hold commas).
 */

/**
 * @typedef {{history: string, scheduler: string, name?: string}} Cell
 */

/**
 * The cells of a PERDURE_CELLS value; throws a TypeError saying what to fix.
 * @param {string} text
 * @returns {Cell[]}
 */
export function parseCells(text) {
  /** @type {Cell[]} */
  const cells = [];
  for (const raw of text.split(/[;\n]/)) {
    const entry = raw.trim();
    if (!entry) continue;
    const equals = entry.indexOf('=');
    const name = equals < 0 ? '' : entry.slice(0, equals).trim();
    const addresses = entry.slice(equals + 1);
    const parts = addresses.split('/').map((part) => part.trim());
    if (!name || addresses.includes('=') || parts.length !== 2 || !parts[0] || !parts[1]) {
      throw new TypeError(
        `cell entry '${entry}' is not name=history_address/scheduler_address (for example a=10.0.0.1:7401/10.0.0.1:7402); separate cells with ';'`,
      );
    }
    cells.push({ name, history: parts[0], scheduler: parts[1] });
  }
  if (cells.length === 0) throw new TypeError("no cells: give name=history/scheduler entries separated by ';'");
  return cells;
}

/**
 * The cells a worker serves: `cells` as given (each {history, scheduler}), else `env`'s
 * PERDURE_CELLS, else none (the worker's own scheduler and history).
 * @param {Cell[] | undefined} given
 * @param {NodeJS.ProcessEnv} env
 * @returns {Cell[]}
 */
export function cellsOf(given, env) {
  if (given === undefined) return env.PERDURE_CELLS?.trim() ? parseCells(env.PERDURE_CELLS) : [];
  if (!Array.isArray(given)) throw new TypeError('cells must be an array of {history, scheduler}');
  for (const cell of given) {
    if (typeof cell?.history !== 'string' || !cell.history || typeof cell.scheduler !== 'string' || !cell.scheduler) {
      throw new TypeError('each cell needs a history and a scheduler address');
    }
  }
  return given;
}
