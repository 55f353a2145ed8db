// tests/e2e/gate_workflows.mjs with its first two steps swapped: it does not replay the runs.

export const workflows = {
  gate_order: async (ctx, n) => {
    const charged = await ctx.step('charge', () => n + 1);
    await ctx.step('reserve', () => n);
    await ctx.waitForSignal('ship');
    return ctx.step('ship', () => `shipped ${charged}`);
  },
};
