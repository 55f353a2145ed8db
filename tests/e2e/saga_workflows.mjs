// The Node.js twin of tests/e2e/saga_workflows.py's saga_trip, for tests/e2e/test_sagas.py:
// reserve, charge, ship in a saga; shipping fails, so the charge is refunded (the refund kills
// its worker with SIGKILL the first time, leaving `input.marker`) and the reservation released.

import fs from 'node:fs';
import { RetryPolicy } from '../../sdk/node/src/index.js';

const QUICK_RETRY = new RetryPolicy({ initialInterval: 0.2, maximumAttempts: 3 });

/**
 * The workflows, each step writing through `ledger(kind, info)` (node_worker.mjs's ledger).
 * @param {(kind: string, info: any) => void} ledger
 */
export function sagaWorkflows(ledger) {
  const counted = (kind, value) => (info) => {
    ledger(kind, info);
    return value;
  };
  const ship = (info) => {
    ledger('ship', info);
    const error = new Error(`no stock for ${info.workflowId}`);
    error.name = 'OutOfStock';
    throw error;
  };
  const refund = (marker) => (info) => {
    ledger('start refund', info);
    if (!fs.existsSync(marker)) {
      fs.writeFileSync(marker, '');
      process.kill(process.pid, 'SIGKILL');
    }
    ledger('refund', info);
    return 'refunded';
  };

  async function nodeSagaTrip(ctx, input) {
    await ctx.saga(async (trip) => {
      await ctx.step('reserve', counted('reserve', 1));
      trip.addCompensation('release', counted('release', 1), { retry: QUICK_RETRY });
      await ctx.step('charge', counted('charge', 2));
      trip.addCompensation('refund', refund(input.marker), { retry: QUICK_RETRY });
      await ctx.step('ship', ship, { retry: new RetryPolicy({ maximumAttempts: 1 }) });
    });
    return 'shipped';
  }

  return { node_saga_trip: nodeSagaTrip };
}
