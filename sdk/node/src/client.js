// Client: start workflows, signal, cancel and read them through the gateway's public
// perdure.api.workflow.v1.WorkflowService, as the Python SDK's perdure.client does.

import { randomUUID } from 'node:crypto';
import { RpcError, WaitTimeoutError, WorkflowEndedError } from './errors.js';
import { runFlow } from './flow.js';
import { fromPayload, toDuration, toPayload } from './payload.js';
import { channelCredentials, clientOptions, errorReason, loadProtos, statusName } from './proto.js';

/** The statuses of a run that is over. */
export const CLOSED = Object.freeze(
  new Set([
    'WORKFLOW_STATUS_COMPLETED',
    'WORKFLOW_STATUS_FAILED',
    'WORKFLOW_STATUS_PARKED',
    'WORKFLOW_STATUS_CANCELLED',
    'WORKFLOW_STATUS_TERMINATED',
  ]),
);

/**
 * Start workflows and read their state through the gateway. Every method rejects with
 * RpcError (its `code`, e.g. "NOT_FOUND", and ErrorInfo `reason`) when the gateway
 * refuses or cannot be reached.
 */
export class Client {
  /**
   * @param {{address?: string, timeout?: number, apiKey?: string, namespace?: string}} [options]
   *   `address`: PERDURE_GATEWAY_ADDRESS or localhost:7400; `timeout`: seconds per call (30);
   *   `apiKey`: PERDURE_API_KEY; `namespace`: the key's (or "default") when empty.
   */
  constructor({ address, timeout = 30, apiKey, namespace = '' } = {}) {
    const { WorkflowService } = loadProtos();
    this.address = address ?? process.env.PERDURE_GATEWAY_ADDRESS ?? 'localhost:7400';
    this.namespace = namespace;
    this._timeoutMs = timeout * 1000;
    this._client = new WorkflowService(this.address, channelCredentials(), clientOptions(apiKey ?? process.env.PERDURE_API_KEY));
  }

  /** Close the connection. */
  close() {
    this._client.close();
  }

  /**
   * Start a run (idempotent by workflow id). Without `workflowId`, a new one is fixed here,
   * before the first send, so that a retried send starts nothing new; the answer carries it.
   * With `executionTimeout` (seconds), the run fails with an ExecutionTimeout failure if it is
   * still open that long after its start. `idReusePolicy` ('ID_REUSE_POLICY_ALLOW', ...) says
   * whether a workflow id whose last run is closed starts a new run; `requestId` names this
   * start (one is fixed here when empty): the same request id returns the run it made.
   *
   * Flow control (docs/worker-protocol.md §27): `keys` (at most 8, e.g. "tenant:acme") put
   * the run's tasks under the limits set on them and its steps' estimates under their budgets;
   * `priority` 1 (served first) to 5 (default 3); `fairnessKey` shares grants fairly across its
   * values; `budget` ({units?, costMicros?}: BigInts or safe integers) bounds the run's whole
   * life; `onBudgetExceeded` 'wait' (the default: a step waits for room) or 'fail' (the step
   * fails with BudgetExceeded). Bad values throw TypeError or RangeError before anything is
   * sent.
   * @param {string} workflowType
   * @param {any} [input]
   * `debounceKey` with `debounceWindow` (seconds) joins the key's pending run instead (it takes
   * this input and waits the window again: `debounced` in the answer); `singletonKey` returns
   * the key's open run if there is one (`singleton`).
   * @param {{workflowId?: string, taskQueue?: string, executionTimeout?: number, idReusePolicy?: string,
   *   requestId?: string, keys?: string[], priority?: number, fairnessKey?: string,
   *   budget?: {units?: number | bigint, costMicros?: number | bigint}, onBudgetExceeded?: 'wait' | 'fail',
   *   debounceKey?: string, debounceWindow?: number, singletonKey?: string}} [options]
   * @returns {Promise<{workflow_id: string, started: boolean, status: string, run_id: string,
   *   debounced: boolean, singleton: boolean}>}
   */
  startWorkflow(workflowType, input = null, { workflowId = '', taskQueue = '', executionTimeout, idReusePolicy = 'ID_REUSE_POLICY_UNSPECIFIED', requestId = '', debounceKey = '', debounceWindow, singletonKey = '', ...flowOptions } = {}) {
    const flow = runFlow(flowOptions);
    const request = this._startRequest(workflowType, workflowId || randomUUID(), taskQueue, input, executionTimeout);
    if (flow) request.flow = flow;
    const keys = { debounce_key: debounceKey, singleton_key: singletonKey };
    if (debounceWindow !== undefined && debounceWindow !== null) keys.debounce_window = toDuration(debounceWindow);
    return this._unary('StartWorkflow', { ...request, ...keys, id_reuse_policy: idReusePolicy, request_id: requestId || randomUUID() });
  }

  /**
   * Send a signal; false when a signal with the same `signalId` was already received.
   * @param {string} workflowId
   * @param {string} signalName
   * @param {any} [payload]
   * @param {{signalId?: string}} [options]
   * @returns {Promise<boolean>}
   */
  async signal(workflowId, signalName, payload = null, { signalId = '' } = {}) {
    const response = await this._unary('SignalWorkflow', {
      namespace: this.namespace,
      workflow_id: workflowId,
      signal_name: signalName,
      payload: toPayload(payload),
      signal_id: signalId,
    });
    return Boolean(response.accepted);
  }

  /**
   * Signal the run, starting it with `input` (and `executionTimeout`, as startWorkflow) first
   * if no run has the id.
   * @param {string} workflowType
   * @param {string} workflowId
   * @param {string} signalName
   * @param {any} [payload]
   * @param {{input?: any, taskQueue?: string, signalId?: string, executionTimeout?: number}} [options]
   */
  signalWithStart(workflowType, workflowId, signalName, payload = null, { input = null, taskQueue = '', signalId = '', executionTimeout } = {}) {
    return this._unary('SignalWithStartWorkflow', {
      start: this._startRequest(workflowType, workflowId, taskQueue, input, executionTimeout),
      signal_name: signalName,
      payload: toPayload(payload),
      signal_id: signalId,
    });
  }

  /**
   * Ask the run to cancel (it may run compensating steps first).
   * @param {string} workflowId
   * @param {string} [reason]
   * @returns {Promise<void>}
   */
  async cancel(workflowId, reason = '') {
    await this._unary('CancelWorkflow', { namespace: this.namespace, workflow_id: workflowId, reason });
  }

  /**
   * End the run at once, without running its code.
   * @param {string} workflowId
   * @param {string} [reason]
   * @returns {Promise<void>}
   */
  async terminate(workflowId, reason = '') {
    await this._unary('TerminateWorkflow', { namespace: this.namespace, workflow_id: workflowId, reason });
  }

  /**
   * Open the parked run again (deploy the fixed code first): a worker replays it from the
   * start. Resolves to its run id.
   * @param {string} workflowId
   * @param {{reason?: string, runId?: string}} [options]
   * @returns {Promise<string>}
   */
  async resume(workflowId, { reason = '', runId = '' } = {}) {
    const response = await this._unary('ResumeWorkflow', { namespace: this.namespace, workflow_id: workflowId, run_id: runId, reason });
    return response.run_id;
  }

  /**
   * Start the workflow id's next run from a copy of its run `runId` (default: the latest)
   * before step `stepId` (or event `eventId`): that step and all after it run again.
   * @param {string} workflowId
   * @param {{stepId?: string, eventId?: number, reason?: string, runId?: string}} [options]
   * @returns {Promise<{run_id: string, copied_up_to_event_id: string}>}
   */
  reset(workflowId, { stepId = '', eventId = 0, reason = '', runId = '' } = {}) {
    return this._unary('ResetWorkflow', {
      namespace: this.namespace,
      workflow_id: workflowId,
      run_id: runId,
      step_id: stepId,
      event_id: eventId,
      reason,
    });
  }

  /**
   * Start a run `newWorkflowId` from a copy of the run's journal before step `stepId`
   * (default: all of it), the recorded outputs of the steps `overrides` names replaced by its
   * values. The source is not changed.
   * @param {string} workflowId
   * @param {string} newWorkflowId
   * @param {{stepId?: string, overrides?: Record<string, any>, reason?: string, runId?: string}} [options]
   * @returns {Promise<{workflow_id: string, run_id: string, copied_up_to_event_id: string}>}
   */
  fork(workflowId, newWorkflowId, { stepId = '', overrides = {}, reason = '', runId = '' } = {}) {
    return this._unary('ForkWorkflow', {
      namespace: this.namespace,
      workflow_id: workflowId,
      run_id: runId,
      new_workflow_id: newWorkflowId,
      step_id: stepId,
      overrides: Object.fromEntries(Object.entries(overrides).map(([step, value]) => [step, toPayload(value)])),
      reason,
    });
  }

  /**
   * The latest value the run published under `key` with ctx.setState.
   * @param {string} workflowId
   * @param {string} key
   */
  async query(workflowId, key) {
    const response = await this._unary('QueryWorkflow', { namespace: this.namespace, workflow_id: workflowId, key });
    return fromPayload(response.value);
  }

  /**
   * The run's state and its recorded steps (a DescribeWorkflowResponse): the workflow id's
   * latest run, or its run `runId`.
   * @param {string} workflowId
   * @param {{runId?: string}} [options]
   * @returns {Promise<any>}
   */
  describe(workflowId, { runId = '' } = {}) {
    return this._unary('DescribeWorkflow', { namespace: this.namespace, workflow_id: workflowId, run_id: runId });
  }

  /**
   * Every event of the run's journal (the latest run's, or run `runId`'s), oldest first,
   * fetched page by page.
   * @param {string} workflowId
   * @param {{pageSize?: number, runId?: string}} [options]
   * @returns {AsyncGenerator<any>}
   */
  async *history(workflowId, { pageSize = 0, runId = '' } = {}) {
    let token = '';
    do {
      const page = await this._unary('GetWorkflowHistory', { namespace: this.namespace, workflow_id: workflowId, page_size: pageSize, page_token: token, run_id: runId });
      yield* page.events ?? [];
      token = page.next_page_token;
    } while (token);
  }

  /**
   * One page of runs, newest first (`stuck`: only runs found stuck; `parentWorkflowId`: only
   * the child workflows of that workflow).
   * @param {{status?: string, workflowType?: string, pageSize?: number, pageToken?: string, stuck?: boolean,
   *   parentWorkflowId?: string}} [options]
   * @returns {Promise<any>}
   */
  list({ status = 'WORKFLOW_STATUS_UNSPECIFIED', workflowType = '', pageSize = 0, pageToken = '', stuck = false, parentWorkflowId = '' } = {}) {
    return this._unary('ListWorkflows', {
      namespace: this.namespace,
      status,
      workflow_type: workflowType,
      page_size: pageSize,
      page_token: pageToken,
      stuck,
      parent_workflow_id: parentWorkflowId,
    });
  }

  /**
   * Poll until the run is closed and return its description; reject with WaitTimeoutError
   * after `timeout` seconds.
   * @param {string} workflowId
   * @param {{timeout?: number}} [options]
   * @returns {Promise<any>}
   */
  async wait(workflowId, { timeout = 60 } = {}) {
    const deadline = performance.now() + timeout * 1000;
    let delay = 20;
    for (;;) {
      const described = await this.describe(workflowId);
      if (CLOSED.has(described.workflow?.status)) return described;
      if (performance.now() >= deadline) throw new WaitTimeoutError(`workflow '${workflowId}' still running after ${timeout}s`);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 1.5, 500);
    }
  }

  /**
   * Wait for the run to close and return its result, decoded; reject with WorkflowEndedError
   * (its `status` and `failure`) if it closed otherwise than completed.
   * @param {string} workflowId
   * @param {{timeout?: number}} [options]
   */
  async result(workflowId, options = {}) {
    const { workflow } = await this.wait(workflowId, options);
    if (workflow.status === 'WORKFLOW_STATUS_COMPLETED') return fromPayload(workflow.result);
    throw new WorkflowEndedError(workflowId, workflow.status, workflow.failure ?? null);
  }

  _startRequest(workflowType, workflowId, taskQueue, input, executionTimeout) {
    /** @type {Record<string, any>} */
    const request = { namespace: this.namespace, workflow_type: workflowType, workflow_id: workflowId, task_queue: taskQueue, input: toPayload(input) };
    if (executionTimeout !== undefined && executionTimeout !== null) request.execution_timeout = toDuration(executionTimeout);
    return request;
  }

  /** One call of WorkflowService, as a promise; failures as RpcError. */
  _unary(method, request) {
    return new Promise((resolve, reject) => {
      this._client[method](request, { deadline: Date.now() + this._timeoutMs }, (error, response) => {
        if (error) reject(new RpcError(statusName(error.code), error.details ?? String(error), errorReason(error)));
        else resolve(response);
      });
    });
  }
}
