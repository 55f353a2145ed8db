// test/gate/deployed.js's order with a step added after the wait: it replays the waiting runs.

import { step } from './deployed.js';

export const workflows = {
  order: async (ctx, n) => {
    const reserved = await ctx.step('reserve', step('reserve', n));
    const charged = await ctx.step('charge', step('charge', reserved + 1));
    await ctx.waitForSignal('ship');
    const shipped = await ctx.step('ship', step('ship', `shipped ${charged}`));
    return ctx.step('receipt', step('receipt', `receipt for ${shipped}`));
  },
};
