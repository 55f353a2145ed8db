// @perdure/worker: the Node.js worker SDK of Perdure.

export { Worker, consoleLogger } from './worker.js';
export { parseCells } from './cells.js';
export { buildIdOf, derivedBuildId } from './build.js';
export { Client } from './client.js';
export { WorkflowContext } from './context.js';
export { ChildWorkflowHandle } from './children.js';
export { Saga } from './saga.js';
export { STOP_REASONS } from './agent-loop.js';
export { StepInfo } from './step-info.js';
export { StreamBufferFullError } from './frames.js';
export { RetryPolicy, NO_RETRY } from './retry.js';
export {
  ApprovalExpiredError,
  BudgetExceededError,
  ChildWorkflowFailedError,
  StepFailedError,
  StepTimeoutError,
  StepHeartbeatTimeoutError,
  WorkerLostError,
  SignalTimeoutError,
  WorkflowCancelledError,
  NonDeterminismError,
  JournalRejectedError,
  WorkerConfigurationError,
  PerdureError,
  RunEvictedError,
  RpcError,
  WaitTimeoutError,
  WorkflowEndedError,
} from './errors.js';
export { toPayload, fromPayload } from './payload.js';
export { usageFromModelResponse } from './usage.js';
export { MODEL_STEP, modelStep, modelText } from './model-call.js';
export { loadProtos, protoDir } from './proto.js';
export { replayHistory, historyFromJson, readHistory } from './replay-check.js';
