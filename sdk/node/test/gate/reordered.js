// test/gate/deployed.js's order with its first two steps swapped: it does not replay.

import { step } from './deployed.js';

export const workflows = {
  order: async (ctx, n) => {
    const charged = await ctx.step('charge', step('charge', n + 1));
    await ctx.step('reserve', step('reserve', n));
    await ctx.waitForSignal('ship');
    return ctx.step('ship', step('ship', `shipped ${charged}`));
  },
};
