// Sticky execution: the cache of suspended runs (sticky.js), and runs resumed from it across
// workflow tasks (runner.js, context.js) against a fake history that keeps the journal.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunEvictedError, StepFailedError } from '../src/errors.js';
import { fromPayload } from '../src/payload.js';
import { Replay } from '../src/replay.js';
import { RetryPolicy } from '../src/retry.js';
import { runWorkflowTask } from '../src/runner.js';
import { RunCache, journalBytes } from '../src/sticky.js';
import { FakeHistory } from './fake-history.js';

const quiet = { info() {}, warn() {}, error() {} };

/** A stand-in kept run: records its eviction. */
function keptRun(bytes = 10) {
  const run = { evicted: false, ctx: { evict: () => (run.evicted = true) }, ended: new Promise(() => {}), fence: 1, lastEventId: 1, bytes };
  return /** @type {any} */ (run);
}

test('the cache lets the least recently kept run go when over its count', () => {
  const cache = new RunCache({ maxRuns: 2 });
  const [a, b, c] = [keptRun(), keptRun(), keptRun()];
  cache.keep('a', a);
  cache.keep('b', b);
  assert.equal(cache.take('a'), a); // a's next task...
  cache.keep('a', a); // ...kept it again: now b is the least recently used
  cache.keep('c', c);
  assert.deepEqual([a.evicted, b.evicted, c.evicted], [false, true, false]);
  assert.deepEqual([cache.holds('a'), cache.holds('b'), cache.holds('c')], [true, false, true]);
  assert.deepEqual(cache.size, { runs: 2, bytes: 20 });
  assert.equal(cache.counts.evictions, 1);
});

test('the cache lets runs go, oldest first, while over its byte budget; a run over it alone is not kept', () => {
  const cache = new RunCache({ maxRuns: 100, maxBytes: 1000 });
  const [a, b, c, huge] = [keptRun(400), keptRun(400), keptRun(500), keptRun(1001)];
  cache.keep('a', a);
  cache.keep('b', b);
  cache.keep('c', c); // 1300 bytes: a goes (900 left)
  assert.deepEqual([a.evicted, b.evicted, c.evicted], [true, false, false]);
  assert.deepEqual(cache.size, { runs: 2, bytes: 900 });
  assert.equal(cache.keep('huge', huge), false);
  assert.equal(huge.evicted, true);
  assert.deepEqual(cache.size, { runs: 2, bytes: 900 });
  cache.close();
  assert.deepEqual([b.evicted, c.evicted], [true, true]);
  assert.deepEqual(cache.size, { runs: 0, bytes: 0 });
  assert.equal(cache.keep('a', keptRun()), false); // closed: keeps nothing more
});

test('a cache of size 0 keeps nothing, and bad bounds are refused', () => {
  const cache = new RunCache({ maxRuns: 0 });
  assert.equal(cache.enabled, false);
  const run = keptRun();
  assert.equal(cache.keep('a', run), false);
  assert.equal(run.evicted, true);
  assert.throws(() => new RunCache({ maxRuns: -1 }), /cacheSize must be an integer >= 0/);
  assert.throws(() => new RunCache({ maxBytes: 0 }), /cacheBytes must be an integer > 0/);
});

test('a journal is sized by history_bytes when history reports it, else estimated from its payloads', () => {
  assert.equal(journalBytes({ history_bytes: 4242, events: [] }, 10), 4242);
  const events = [{ payload: { data: Buffer.alloc(1000) } }, { failure: { message: 'x'.repeat(50) } }];
  assert.equal(journalBytes({ events }, 10), 10 + 128 + 1000 + 128 + 50);
});

/**
 * Run the workflow task of `history`'s run under `fence`, as the worker does.
 * @param {FakeHistory} history
 * @param {Record<string, (ctx: any, input: any) => Promise<any>>} workflows
 * @param {number} fence
 * @param {RunCache | undefined} cache
 */
function task(history, workflows, fence, cache) {
  const entries = new Map(Object.entries(workflows).map(([name, fn]) => [name, { fn, retry: new RetryPolicy({ initialInterval: 5 }) }]));
  return runWorkflowTask({ workflow_id: history.workflow.workflow_id, fence }, history, entries, { log: quiet, cache });
}

test("a workflow task's loads carry its grant's lease proof, and no other call does", async () => {
  const history = new FakeHistory({ workflowType: 'two' });
  const proof = Buffer.from('signed grant');
  const two = async (ctx) => [await ctx.step('a', () => 1), await ctx.step('b', () => 2)];
  const entries = new Map([['two', { fn: two, retry: new RetryPolicy({ initialInterval: 5 }) }]]);
  const task = { workflow_id: history.workflow.workflow_id, fence: 1, lease_proof: proof };
  await runWorkflowTask(task, history, entries, { log: quiet });
  assert.ok(history.loads.length >= 1);
  assert.ok(history.loads.every((load) => Buffer.from(load.lease_proof).equals(proof)));
  assert.ok(history.records.length > 0 && history.records.every(([, request]) => !('lease_proof' in request)));
});

/** A chat-like loop: `turns` signals, a step and a state per turn; counts each pass. */
function chatLoop(passes) {
  return async (ctx, input) => {
    const lines = [];
    passes.push('start');
    for (let turn = 0; turn < input.turns; turn++) {
      const said = await ctx.waitForSignal('say');
      passes.push(`turn ${turn}`);
      const reply = await ctx.step('reply', () => `re: ${said}`);
      await ctx.setState('lines', turn + 1);
      lines.push(reply);
    }
    return lines;
  };
}

/** Drive a chat loop of 4 turns through its tasks; the journal and how often each point ran. */
async function driveChat(cache) {
  const passes = [];
  const history = new FakeHistory({ workflowType: 'chat', input: { turns: 4 } });
  const workflows = { chat: chatLoop(passes) };
  let fence = 1;
  assert.equal(await task(history, workflows, fence++, cache), 'suspended');
  for (let turn = 0; turn < 4; turn++) {
    history.signal('say', `hello ${turn}`);
    await task(history, workflows, fence++, cache);
  }
  assert.equal(history.workflow.status, 'WORKFLOW_STATUS_COMPLETED');
  return { passes, history };
}

test('a kept run resumes where it waits: each point of the code runs once, and the journal is the replayed run\'s', async () => {
  const cache = new RunCache({ maxRuns: 10 });
  const sticky = await driveChat(cache);
  const replayed = await driveChat(undefined);
  assert.deepEqual(sticky.passes, ['start', 'turn 0', 'turn 1', 'turn 2', 'turn 3']);
  assert.equal(replayed.passes.filter((p) => p === 'start').length, 5); // replayed on each task
  assert.deepEqual(sticky.history.summary(), replayed.history.summary());
  assert.deepEqual(fromPayload(sticky.history.result), ['re: hello 0', 're: hello 1', 're: hello 2', 're: hello 3']);
  assert.deepEqual(cache.counts, { hits: 4, misses: 1, evictions: 0 });
  assert.equal(cache.holds('wf-1'), false); // finished: not kept
  // Resumed tasks loaded only what was recorded after the kept position.
  // (The first task saw event 1, then suspended: the second loads after it.)
  assert.deepEqual(sticky.history.loads.map((l) => l.after_event_id ?? 0).slice(0, 2), [0, 1]);
});

test('a run loaded by another lease since it was kept is replayed from the start, not resumed', async () => {
  const cache = new RunCache({ maxRuns: 10 });
  const passes = [];
  const history = new FakeHistory({ workflowType: 'chat', input: { turns: 2 } });
  const workflows = { chat: chatLoop(passes) };
  await task(history, workflows, 1, cache);
  assert.equal(cache.holds('wf-1'), true);
  const kept = cache.take('wf-1');
  cache.keep('wf-1', kept);
  // Another worker held the run meanwhile (fence 2) and consumed a signal: the kept state is stale.
  history.signal('say', 'elsewhere');
  await task(history, workflows, 2, undefined);
  history.signal('say', 'here');
  passes.length = 0;
  await task(history, workflows, 3, cache);
  assert.deepEqual(passes, ['start', 'turn 0', 'turn 1']); // replayed: the delta was not applied
  assert.deepEqual(fromPayload(history.result), ['re: elsewhere', 're: here']);
  assert.deepEqual(cache.counts, { hits: 0, misses: 2, evictions: 1 });
  // The stale run was let go: any call it made would be refused.
  await assert.rejects(kept.ctx.step('late', () => 1), RunEvictedError);
});

test('an evicted run records nothing: any later call of its context rejects', async () => {
  const cache = new RunCache({ maxRuns: 1 });
  const first = new FakeHistory({ workflowId: 'wf-1', workflowType: 'chat', input: { turns: 3 } });
  const second = new FakeHistory({ workflowId: 'wf-2', workflowType: 'chat', input: { turns: 3 } });
  const workflows = { chat: chatLoop([]) };
  await task(first, workflows, 1, cache);
  const kept = cache.take('wf-1');
  cache.keep('wf-1', kept);
  await task(second, workflows, 1, cache); // over the count: wf-1 goes
  assert.equal(cache.holds('wf-1'), false);
  const recorded = first.records.length;
  await assert.rejects(kept.ctx.waitForSignal('say'), RunEvictedError);
  await assert.rejects(kept.ctx.setState('k', 1), /let go by the worker's cache/);
  assert.equal(first.records.length, recorded);
  assert.equal(kept.ctx.resume({ events: [], workflow: first.workflow }, 2), false);
  // Its next task replays it from its journal.
  first.signal('say', 'again');
  await task(first, workflows, 2, cache); // and, kept again, lets wf-2 go
  assert.deepEqual(cache.counts, { hits: 0, misses: 3, evictions: 2 });
});

test('a kept run and a replayed one answer, record and place patch markers alike', async () => {
  /** Ask "early" before a wait (the run suspends with its marker unsent), "late" after it. */
  const patchy = async (ctx) => {
    const answers = [ctx.patched('early')];
    const said = await ctx.waitForSignal('say');
    answers.push(ctx.patched('early'), ctx.patched('late'));
    await ctx.step('reply', () => `re: ${said}`);
    await ctx.waitForSignal('say');
    answers.push(ctx.patched('late'));
    return answers;
  };
  const drive = async (cache) => {
    const history = new FakeHistory({ workflowType: 'patchy' });
    assert.equal(await task(history, { patchy }, 1, cache), 'suspended');
    for (const [index, said] of ['one', 'two'].entries()) {
      history.signal('say', said);
      await task(history, { patchy }, index + 2, cache);
    }
    assert.equal(history.workflow.status, 'WORKFLOW_STATUS_COMPLETED');
    return history;
  };
  const cache = new RunCache({ maxRuns: 10 });
  const sticky = await drive(cache);
  const replayed = await drive(undefined);
  assert.equal(cache.counts.hits, 2);
  assert.deepEqual(sticky.summary(), replayed.summary());
  assert.deepEqual(fromPayload(sticky.result), [true, true, true, true]);
  const markers = (history) => history.events.filter((e) => e.event_type === 'EVENT_TYPE_PATCH_RECORDED').map((e) => [e.name, Number(e.position)]);
  assert.deepEqual(markers(sticky), [['early', 0], ['late', 1]]);
  // Each marker went just before the next record: the consumption, the step's attempt.
  const methods = sticky.records.map(([method]) => method).filter((m) => m !== 'SuspendWorkflow');
  assert.deepEqual(methods.slice(0, 4), ['RecordPatch', 'ConsumeSignals', 'RecordPatch', 'RecordStep']);
});

test('a kept run resumes past timers, retries and remote steps, as a replay would', async () => {
  const script = (passes) => async (ctx) => {
    passes.push('start');
    await ctx.sleep(60);
    passes.push('slept');
    const flaky = await ctx.step('flaky', (info) => {
      if (info.attempt === 1) throw new Error('first attempt fails');
      return info.attempt;
    });
    passes.push('retried');
    const [a, b] = await ctx.gather([ctx.call('remote', 1), ctx.call('remote', 2)]);
    passes.push('gathered');
    let failed = null;
    try {
      await ctx.step('never', () => {
        throw new TypeError('no');
      }, { retry: new RetryPolicy({ maximumAttempts: 1 }) });
    } catch (error) {
      failed = error instanceof StepFailedError;
    }
    return { flaky, a, b, failed };
  };
  const drive = async (cache) => {
    const passes = [];
    const history = new FakeHistory({ workflowType: 'mixed' });
    const workflows = { mixed: script(passes) };
    await task(history, workflows, 1, cache); // timer
    history.nowMs += 61_000;
    await task(history, workflows, 2, cache); // fired; the step's first attempt fails
    history.nowMs += 10_000;
    await task(history, workflows, 3, cache); // retried; remote steps scheduled
    history.remoteCompleted('remote', 'A');
    await task(history, workflows, 4, cache); // one outcome: still waiting
    history.remoteCompleted('remote#2', 'B');
    await task(history, workflows, 5, cache);
    return { passes, history };
  };
  const cache = new RunCache({ maxRuns: 10 });
  const sticky = await drive(cache);
  const replayed = await drive(undefined);
  assert.deepEqual(sticky.passes, ['start', 'slept', 'retried', 'gathered']);
  assert.deepEqual(fromPayload(sticky.history.result), { flaky: 2, a: 'A', b: 'B', failed: true });
  assert.deepEqual(sticky.history.summary(), replayed.history.summary());
  assert.deepEqual(cache.counts, { hits: 4, misses: 1, evictions: 0 });
});

test('a cancel request is not applied to a kept run: it is replayed, and cancelled as a replay would be', async () => {
  const cache = new RunCache({ maxRuns: 10 });
  const passes = [];
  const history = new FakeHistory({ workflowType: 'chat', input: { turns: 3 } });
  await task(history, { chat: chatLoop(passes) }, 1, cache);
  history.cancel();
  await task(history, { chat: chatLoop(passes) }, 2, cache);
  assert.deepEqual(passes, ['start', 'start']);
  assert.equal(history.result.type, 'WorkflowCancelledError');
  assert.deepEqual(cache.counts, { hits: 0, misses: 2, evictions: 1 });
});

test('a kept replay takes only what a waiting run may receive: a record past its position, or an unknown event, is refused', () => {
  const started = { event_id: 1, event_type: 'EVENT_TYPE_WORKFLOW_STARTED', position: 0, step_id: '' };
  const workflow = { cancel_requested: false };
  const replay = () => {
    const kept = new Replay({ workflow, events: [started] });
    kept.allocate('$signal:say'); // the code waits at position 0
    return kept;
  };
  const own = { event_id: 2, event_type: 'EVENT_TYPE_STATE_UPDATED', position: 0, step_id: '$state:k' };
  const signal = { event_id: 3, event_type: 'EVENT_TYPE_SIGNAL_RECEIVED', name: 'say', position: 0, step_id: '' };
  const kept = replay();
  assert.equal(kept.extend([own, signal], workflow), true);
  assert.deepEqual(kept.signals.map((e) => e.event_id), [3]);
  assert.equal(kept.recorded.size, 0); // its own record is not replayed again
  const ahead = { event_id: 2, event_type: 'EVENT_TYPE_STEP_COMPLETED', position: 1, step_id: 'other' };
  assert.equal(replay().extend([ahead], workflow), false);
  assert.equal(replay().extend([{ event_id: 2, event_type: 'EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW' }], workflow), false);
  assert.equal(replay().extend([], { cancel_requested: true }), false);
});

test('a signal that arrives while the task runs, between its own records, is taken at the next task', async () => {
  const drive = async (cache) => {
    const passes = [];
    const history = new FakeHistory({ workflowType: 'echo' });
    const workflows = {
      echo: async (ctx) => {
        passes.push('start');
        const first = await ctx.waitForSignal('say');
        // The next signal comes while this task runs: after its load, before its next records.
        await ctx.step('between', () => history.signal('say', 'second'));
        await ctx.setState('heard', first);
        const second = await ctx.waitForSignal('say');
        passes.push('second');
        return [first, second];
      },
    };
    await task(history, workflows, 1, cache);
    history.signal('say', 'first');
    await task(history, workflows, 2, cache); // takes "first"; "second" came after its load
    assert.notEqual(history.workflow.status, 'WORKFLOW_STATUS_COMPLETED');
    await task(history, workflows, 3, cache);
    return { passes, history };
  };
  const cache = new RunCache({ maxRuns: 10 });
  const sticky = await drive(cache);
  const replayed = await drive(undefined);
  assert.deepEqual(sticky.passes, ['start', 'second']);
  assert.deepEqual(fromPayload(sticky.history.result), ['first', 'second']);
  assert.deepEqual(sticky.history.summary(), replayed.history.summary());
  assert.equal(cache.counts.hits, 2);
});
