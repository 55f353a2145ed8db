#!/usr/bin/env node
// perdure-replay: the replay gate for Node.js workflow code, as `perdure replay` is for Python's
// (docs/operations.md). Replays saved histories (--file) or the runs a gateway lists against
// the workflows a module exports, with no step run; exit 0 when every run replays, 1 when one
// is non-deterministic, 2 when the gate itself cannot run.
//
//   perdure-replay --module ./workflows.js --file history.json [--file ...] [--json]
//   perdure-replay --module ./workflows.js [--gateway ADDR] [--namespace N] [--type T]
//                  [--all] [--since 7d] [--limit N] [--json]
//
// The module exports its workflows as `workflows` (or as its default export): the object
// `new Worker({workflows})` takes. The API key comes from PERDURE_API_KEY (a reader's will do).

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '../src/client.js';
import { RpcError } from '../src/errors.js';
import { readHistory, replayHistory } from '../src/replay-check.js';

const OPEN = new Set(['WORKFLOW_STATUS_RUNNING', 'WORKFLOW_STATUS_WAITING']);
const UNITS = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
const PAGE_SIZE = 100;
const DEFAULT_LIMIT = 1000;

class GateError extends Error {}

function options() {
  try {
    const { values } = parseArgs({
      options: {
        module: { type: 'string' },
        file: { type: 'string', multiple: true, default: [] },
        gateway: { type: 'string', default: process.env.PERDURE_GATEWAY_ADDRESS ?? 'localhost:7400' },
        namespace: { type: 'string', default: process.env.PERDURE_NAMESPACE ?? '' },
        type: { type: 'string', default: '' },
        open: { type: 'boolean', default: false },
        all: { type: 'boolean', default: false },
        since: { type: 'string' },
        limit: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    });
    if (!values.module) throw new GateError('--module is required: the file whose exported workflows replay the runs');
    if (values.open && values.all) throw new GateError('--open and --all exclude each other');
    const live = { '--type': values.type, '--open': values.open, '--all': values.all, '--since': values.since, '--limit': values.limit };
    const given = Object.keys(live).filter((flag) => live[flag]);
    if (values.file.length && given.length) throw new GateError(`${given.join(', ')} choose among live runs; with --file, the histories given are replayed`);
    const limit = Number(values.limit ?? DEFAULT_LIMIT);
    if (!/^\d+$/.test(values.limit ?? String(DEFAULT_LIMIT)) || limit < 1) throw new GateError(`--limit '${values.limit}' is not a whole number >= 1`);
    let sinceMs = null;
    if (values.since !== undefined) {
      const match = /^(\d+)([smhdw])$/.exec(values.since.trim());
      if (!match) throw new GateError(`--since '${values.since}' is not a duration: a number and a unit s, m, h, d or w (7d, 12h)`);
      sinceMs = Number(match[1]) * UNITS[match[2]] * 1000;
    }
    return { ...values, limit, sinceMs };
  } catch (error) {
    if (error instanceof GateError) throw error;
    throw new GateError(error.message);
  }
}

async function loadWorkflows(module) {
  let loaded;
  try {
    loaded = await import(pathToFileURL(path.resolve(module)).href);
  } catch (error) {
    throw new GateError(`cannot import --module '${module}': ${error.message}`);
  }
  const workflows = loaded.workflows ?? loaded.default;
  if (!workflows || typeof workflows !== 'object' || !Object.keys(workflows).length) {
    throw new GateError(`--module '${module}' exports no workflows (export const workflows = {type: fn, ...})`);
  }
  return workflows;
}

/** The runs asked for, newest first, with their journals (none for a type not in the code). */
async function* fetched(client, opts, workflows) {
  const since = opts.sinceMs === null ? null : Date.now() - opts.sinceMs;
  let token = '';
  let taken = 0;
  do {
    const page = await client.list({ workflowType: opts.type, pageSize: PAGE_SIZE, pageToken: token });
    for (const info of page.workflows ?? []) {
      if (since !== null && Number(info.create_time?.seconds ?? 0) * 1000 < since) return;
      if (!opts.all && !OPEN.has(info.status)) continue;
      const events = [];
      if (info.workflow_type in workflows) {
        for await (const event of client.history(info.workflow_id, { pageSize: 1000, runId: info.run_id })) events.push(event);
      }
      yield { workflow: info, events };
      if (++taken >= opts.limit) return;
    }
    token = page.next_page_token;
  } while (token);
}

function report(verdicts, asJson) {
  const replayed = verdicts.filter((v) => v.outcome !== 'skipped');
  const count = (outcome) => replayed.filter((v) => v.outcome === outcome).length;
  const summary = {
    replayed: replayed.length,
    passed: count('passed'),
    non_deterministic: count('non_deterministic'),
    errors: count('error'),
    skipped: verdicts.length - replayed.length,
  };
  if (asJson) {
    console.log(JSON.stringify({ runs: verdicts, summary }, null, 2));
    return summary;
  }
  const header = ['WORKFLOW ID', 'RUN ID', 'TYPE', 'RESULT', 'POSITION', 'EXPECTED', 'FOUND'];
  const rows = replayed.map((v) => [
    v.workflowId,
    v.runId,
    v.workflowType,
    v.outcome.toUpperCase().replace('_', '-'),
    v.position === null ? '-' : String(v.position),
    v.expected || '-',
    v.found || '-',
  ]);
  const widths = header.map((_, i) => Math.max(...[header, ...rows].map((row) => row[i].length)));
  for (const row of [header, ...rows]) console.log(row.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd());
  for (const v of replayed) if (v.outcome !== 'passed') console.log(`\n${v.workflowId}, run ${v.runId}:\n  ${v.detail}`);
  const errors = summary.errors ? `, ${summary.errors} errors` : '';
  console.log(
    `\n${summary.replayed} replayed, ${summary.passed} passed, ${summary.non_deterministic} non-deterministic${errors}, ${summary.skipped} skipped (not in --module)`,
  );
  return summary;
}

async function main() {
  const opts = options();
  const workflows = await loadWorkflows(opts.module);
  const verdicts = [];
  if (opts.file.length) {
    let histories;
    try {
      histories = opts.file.map((file) => readHistory(file));
    } catch (error) {
      throw new GateError(error.message);
    }
    for (const history of histories) verdicts.push(await replayHistory(workflows, history));
  } else {
    const client = new Client({ address: opts.gateway, apiKey: process.env.PERDURE_API_KEY, namespace: opts.namespace });
    try {
      for await (const history of fetched(client, opts, workflows)) verdicts.push(await replayHistory(workflows, history));
    } catch (error) {
      if (!(error instanceof RpcError)) throw error;
      throw new GateError(`the gateway at ${opts.gateway} answered ${error.code}: ${error.details}`);
    } finally {
      client.close();
    }
  }
  const summary = report(verdicts, opts.json);
  return summary.non_deterministic || summary.errors ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`perdure-replay: ${error instanceof GateError ? error.message : error.stack}`);
    process.exit(2);
  },
);
