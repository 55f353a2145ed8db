// tests/e2e/gate_workflows.py's gate_order in JavaScript, for the Node.js replay gate
// (sdk/node/bin/perdure-replay.js) against the runs its Python worker recorded
// (tests/e2e/test_replay_gate.py).

export const workflows = {
  gate_order: async (ctx, n) => {
    const reserved = await ctx.step('reserve', () => n);
    const charged = await ctx.step('charge', () => reserved + 1);
    await ctx.waitForSignal('ship');
    return ctx.step('ship', () => `shipped ${charged}`);
  },
};
