"""Write durable workflows and run them: `@workflow`, `WorkflowContext`, `Worker`.

A workflow is an async function `fn(ctx, input)`. Every call that has an effect or can give a
different answer twice goes through `await ctx.step(name, fn, *args)`; its result is journaled,
and after a crash the workflow is replayed from its first line with recorded results.

Waiting is state: failed steps are retried on a journaled schedule (`RetryPolicy`),
`ctx.sleep`/`ctx.sleep_until` are durable timers, `ctx.wait_for_signal`/`ctx.drain_signals`
consume signals, and a waiting workflow holds no worker. `ctx.set_state` publishes values for
DescribeWorkflow and QueryWorkflow; `ctx.heartbeat` records a long step's progress, and
`current_step().emit(chunk)` publishes a step's partial output (token streams); a cancel
request arrives as `WorkflowCancelledError` at the next durable call. A long loop ends its run
and starts the next one of its workflow id with `await ctx.continue_as_new(state)`, deciding
by `ctx.info` (a `RunInfo`: run id and number, the journal's length and bytes so far).
`ctx.saga()` undoes a failed or cancelled block's work with compensating steps (a `Saga`), and
`ctx.agent_loop(take_turn, objective=...)` runs turns toward a standing objective that people
steer and abandon with signals (`Turn`, `TurnResult`, `AgentLoopResult`).

Remote steps: `await ctx.call(step_type, input, task_queue=...)` (several at once with
`ctx.gather`) has a step executed by a worker serving that type, in any language; a Python
worker serves the functions marked `@remote_step` that it is given. A call may declare flow
control's `keys` and an `estimate` (a `Usage`); its handler reports what it used with
`current_step().report_usage(...)` or `report_model_usage(response, ModelPrices(...))`, and a
step refused by a budget raises `BudgetExceededError`.

Model calls: `await ctx.model_call(model=..., messages=[...], max_tokens=...)` is a remote step
served by `model_step(client, prices)` on a worker holding any OpenAI-compatible client; the
model, tokens and cost it used are journaled with the step and settle its budgets.
A person's decision: `await ctx.approval(name, details, timeout=...)` creates an approval
record (decided once, through ApprovalService, by its approvers) and returns an
`ApprovalDecision`, or raises `ApprovalExpiredError` at its expiry.
Child workflows: `await ctx.child(workflow_type, input)` runs another workflow to its end and
returns its result (`ChildWorkflowFailedError` if it did not complete); `ctx.start_child`
returns its `ChildWorkflowHandle` at once. A parent's close terminates its open children, or
asks them to cancel, or leaves them (`parent_close_policy`).

A worker serves several cells (databases, each with its scheduler and history) when given
`cells=[Cell(history=..., scheduler=...), ...]`: one session per cell.

Every error the SDK raises is a `PerdureError`.
"""

from perdure.worker._agent_loop import AgentLoopResult, Turn, TurnResult
from perdure.worker._approvals import ApprovalDecision, ApprovalEscalation
from perdure.worker._attempt import StepContext, current_step, heartbeat
from perdure.worker._cells import Cell
from perdure.worker._children import ChildWorkflowHandle
from perdure.worker._context import RemoteCall, WorkflowContext
from perdure.worker._errors import (
    ApprovalExpiredError,
    BudgetExceededError,
    ChildWorkflowFailedError,
    JournalRejectedError,
    LeaseLostError,
    NonDeterminismError,
    PerdureError,
    SignalTimeoutError,
    StepFailedError,
    StepHeartbeatTimeoutError,
    StepTimeoutError,
    StreamBufferFullError,
    WorkerConfigurationError,
    WorkerLostError,
    WorkflowCancelledError,
)
from perdure.worker._flow import Usage
from perdure.worker._info import RunInfo
from perdure.worker._model_call import MODEL_STEP, model_step, model_text
from perdure.worker._model_usage import ModelPrices, report_model_usage, usage_from_model_response
from perdure.worker._registry import remote_step, workflow
from perdure.worker._retry import RetryPolicy
from perdure.worker._saga import Saga
from perdure.worker._worker import Worker

__all__ = [
    "MODEL_STEP",
    "AgentLoopResult",
    "ApprovalDecision",
    "ApprovalEscalation",
    "ApprovalExpiredError",
    "BudgetExceededError",
    "Cell",
    "ChildWorkflowFailedError",
    "ChildWorkflowHandle",
    "JournalRejectedError",
    "LeaseLostError",
    "ModelPrices",
    "NonDeterminismError",
    "PerdureError",
    "RemoteCall",
    "RetryPolicy",
    "RunInfo",
    "Saga",
    "SignalTimeoutError",
    "StepContext",
    "StepFailedError",
    "StepHeartbeatTimeoutError",
    "StepTimeoutError",
    "StreamBufferFullError",
    "Turn",
    "TurnResult",
    "Usage",
    "Worker",
    "WorkerConfigurationError",
    "WorkerLostError",
    "WorkflowCancelledError",
    "WorkflowContext",
    "current_step",
    "heartbeat",
    "model_step",
    "model_text",
    "remote_step",
    "report_model_usage",
    "usage_from_model_response",
    "workflow",
]
