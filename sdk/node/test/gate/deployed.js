// The replay gate's tests (test/replay-check.test.js): an order that reserves and charges, then
// waits for the signal "ship", as deployed; the runs in the tests' histories ran this code.

/** @type {string[]} the steps whose bodies ran: the gate must run none */
export const ran = [];

export const step = (name, value) => () => {
  ran.push(name);
  return value;
};

export const workflows = {
  order: async (ctx, n) => {
    const reserved = await ctx.step('reserve', step('reserve', n));
    const charged = await ctx.step('charge', step('charge', reserved + 1));
    await ctx.waitForSignal('ship');
    return ctx.step('ship', step('ship', `shipped ${charged}`));
  },
};
