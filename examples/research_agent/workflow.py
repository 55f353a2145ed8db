"""The research agent: plan, research twice, analyze, recommend, wait for a human, report, notify.

    create_plan → research_1 → research_2 → analyze → recommend → approval → report → notify

Every model call is a durable step, so a crash anywhere loses nothing and repeats no finished
step. The approval is an approval record (`ctx.approval`; decided with
`perdure approve ID [--reject] [--reason ...]`, `perdure approvals`, or the web UI's inbox),
decided once, by a person who saw its details (the recommendation): while it waits, the
workflow is suspended and no process holds it. Undecided after `approval_timeout` (a week) it
expires and the run ends without a report. A rejection ends the run with the recommendation as
its result; an approval writes the report and sends it once (see `notifications`). Progress is
published with `ctx.set_state` (`phase`, `recommendation`, `waiting_for`, `approval`), visible in
`perdure workflow describe` and `perdure workflow query ID phase` while the run waits.
`perdure workflow cancel ID` ends a run as CANCELLED at its next durable call (phase
`cancelled`).

Input (JSON object; every field optional):

- `topic`: what to research (default "durable execution").
- `slow_step` + `slow_seconds`: that step sleeps `slow_seconds` first, leaving time to kill the
  worker during it. `slow_seconds` alone slows `research_1`.
- `fail_step_once`: that step fails with a temporary error on its first attempt only; the
  attempt is journaled and retried on the durable schedule (1 s later).
- `crash_after_notification`: the worker process exits right after the notification was
  really sent, before the notify step is recorded; the replay finds the reservation `sent`,
  sends nothing and does not crash again.
- `crash_mid_stream`: `analyze` or `report`; on that step's first attempt the worker process
  exits after streaming a few tokens. The step is retried (attempt 2, on the next worker) and
  readers of the run's stream see a reset frame before the new attempt's tokens.

`analyze` and `report` stream their text (the analysis summary, the report body) token by token
on the run's `output` stream (`current_step().emit`) as the model produces it, and return it
whole in their result: the result's text is the concatenation of the last attempt's tokens.
- `notify_queue`: the notification is a remote step `notify` executed by a worker serving
  this task queue, in any language (`examples/node_notify` serves it in Node.js on
  `node-tools`), instead of the local step above.
- `approval_timeout`: seconds the approval waits for a decision (default a week); then it
  expires and the run ends with decision "expired", without a report.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from examples.inputs import input_fields
from examples.research_agent.model import OfflineModel
from examples.research_agent.notifications import send_once
from perdure.worker import (
    ApprovalExpiredError,
    BudgetExceededError,
    ModelPrices,
    RetryPolicy,
    StepContext,
    Usage,
    WorkflowCancelledError,
    WorkflowContext,
    current_step,
    remote_step,
    report_model_usage,
    workflow,
)

log = logging.getLogger("examples.research_agent")

STEPS = ("create_plan", "research_1", "research_2", "analyze", "recommend", "report", "notify")
STREAMED_STEPS = ("analyze", "report")
CRASH_AFTER_TOKENS = 5  # crash_mid_stream: tokens streamed before the worker exits
# crash_mid_stream: the SDK sends emitted tokens in the background; this leaves it the time
# to store those streamed so far (a round trip or two), so that readers see them, then a reset.
CRASH_GRACE_SECONDS = 1.0
DEFAULT_TOPIC = "durable execution"
RECIPIENT = "research-team@example.com"
APPROVAL_NAME = "recommendation"  # the approval the run asks for (ctx.approval)
DEFAULT_APPROVAL_TIMEOUT = 7 * 24 * 3600.0  # a week: then the run ends as expired
MAX_APPROVAL_TIMEOUT = 365 * 24 * 3600.0
CRASH_EXIT_CODE = 70
MAX_SLOW_SECONDS = 3600.0
MAX_MODEL_TOKENS = 1_000_000
# What the offline model would cost at a provider's prices: USD 2.50 per million input
# tokens, 10 per million output tokens (in millionths of a dollar per million tokens).
PRICES = ModelPrices(input_micros_per_million=2_500_000, output_micros_per_million=10_000_000)
MODEL_KEY = "provider:offline"  # the key model calls declare: limits and budgets on it apply
# Short, so the demo's failing step is retried after a second: 1 s, 2 s, 4 s ... at most 10 s.
RETRY = RetryPolicy(
    initial_interval=1.0,
    backoff_coefficient=2.0,
    maximum_interval=10.0,
    maximum_attempts=5,
    non_retryable_error_types=("ValueError", "StaleFenceError"),
)

_model = OfflineModel()


class TemporaryProviderError(Exception):
    """The (simulated) model provider is briefly unavailable: worth retrying."""


@dataclass(frozen=True)
class AgentInput:
    """The validated input of a run."""

    topic: str = DEFAULT_TOPIC
    slow_step: str | None = None
    slow_seconds: float = 0.0
    fail_step_once: str | None = None
    crash_after_notification: bool = False
    notify_queue: str | None = None
    crash_mid_stream: str | None = None
    # Each model call is a remote step `model` declaring this many tokens as its estimate,
    # reserved against the run's budgets before it is granted; it reports the tokens it used.
    # None: model calls are local steps, under no budget.
    model_tokens: int | None = None
    # How long the approval waits for a decision, in seconds.
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT

    @classmethod
    def parse(cls, raw: Any) -> AgentInput:
        """Check a run's input; raise ValueError saying what is wrong."""
        raw = input_fields(raw, cls.__dataclass_fields__)
        if raw is None:
            return cls()
        topic = raw.get("topic", DEFAULT_TOPIC)
        if not isinstance(topic, str) or not topic.strip():
            raise ValueError("topic must be a non-empty string")
        slow_seconds = raw.get("slow_seconds", 0)
        if (
            isinstance(slow_seconds, bool)
            or not isinstance(slow_seconds, int | float)
            or not math.isfinite(slow_seconds)
            or not 0 <= slow_seconds <= MAX_SLOW_SECONDS
        ):
            raise ValueError(
                f"slow_seconds must be a number of seconds from 0 to {MAX_SLOW_SECONDS:.0f}, "
                f"not {slow_seconds!r}"
            )
        slow_step = _step_name("slow_step", raw.get("slow_step"))
        if slow_step is None and slow_seconds > 0:
            slow_step = "research_1"
        if slow_step is not None and slow_seconds == 0:
            raise ValueError(f"slow_step {slow_step!r} needs slow_seconds > 0")
        crash = raw.get("crash_after_notification", False)
        if not isinstance(crash, bool):
            raise ValueError(f"crash_after_notification must be true or false, not {crash!r}")
        notify_queue = raw.get("notify_queue")
        if notify_queue is not None and (not isinstance(notify_queue, str) or not notify_queue):
            raise ValueError(f"notify_queue must be a task queue name, not {notify_queue!r}")
        if notify_queue is not None and crash:
            raise ValueError("crash_after_notification applies to the local notify step only")
        mid_stream = raw.get("crash_mid_stream")
        if mid_stream is not None and mid_stream not in STREAMED_STEPS:
            raise ValueError(
                f"crash_mid_stream must be one of {', '.join(STREAMED_STEPS)} (the steps that "
                f"stream), not {mid_stream!r}"
            )
        model_tokens = raw.get("model_tokens")
        if model_tokens is not None and (
            isinstance(model_tokens, bool)
            or not isinstance(model_tokens, int)
            or not 1 <= model_tokens <= MAX_MODEL_TOKENS
        ):
            raise ValueError(
                f"model_tokens must be a whole number of tokens from 1 to {MAX_MODEL_TOKENS}, "
                f"not {model_tokens!r}"
            )
        approval_timeout = raw.get("approval_timeout", DEFAULT_APPROVAL_TIMEOUT)
        if (
            isinstance(approval_timeout, bool)
            or not isinstance(approval_timeout, int | float)
            or not 0 < approval_timeout <= MAX_APPROVAL_TIMEOUT
        ):
            raise ValueError(
                "approval_timeout must be a number of seconds above 0 and at most a year, "
                f"not {approval_timeout!r}"
            )
        return cls(
            topic=topic.strip(),
            slow_step=slow_step,
            slow_seconds=float(slow_seconds),
            fail_step_once=_step_name("fail_step_once", raw.get("fail_step_once")),
            crash_after_notification=crash,
            notify_queue=notify_queue,
            crash_mid_stream=mid_stream,
            model_tokens=model_tokens,
            approval_timeout=float(approval_timeout),
        )

    def to_json(self) -> dict[str, Any]:
        """The input as JSON: the topic and the fault switches that are on."""
        value: dict[str, Any] = {"topic": self.topic}
        if self.slow_step is not None:
            value.update(slow_step=self.slow_step, slow_seconds=self.slow_seconds)
        if self.fail_step_once is not None:
            value["fail_step_once"] = self.fail_step_once
        if self.crash_after_notification:
            value["crash_after_notification"] = True
        if self.notify_queue is not None:
            value["notify_queue"] = self.notify_queue
        if self.crash_mid_stream is not None:
            value["crash_mid_stream"] = self.crash_mid_stream
        if self.model_tokens is not None:
            value["model_tokens"] = self.model_tokens
        if self.approval_timeout != DEFAULT_APPROVAL_TIMEOUT:
            value["approval_timeout"] = self.approval_timeout
        return value


def _step_name(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if value not in STEPS:
        raise ValueError(f"{field} must be one of {', '.join(STEPS)}, not {value!r}")
    return str(value)


def _enter(spec: AgentInput) -> StepContext:
    """The start of every step: log it, then apply the fault switches aimed at it."""
    step = current_step()
    log.info(
        "research_agent %s: running step %s (attempt %d, fence %d)",
        step.workflow_id,
        step.step_id,
        step.attempt,
        step.fence,
    )
    if spec.slow_step == step.step_id:
        log.info(
            "research_agent %s: %s sleeps %gs", step.workflow_id, step.step_id, spec.slow_seconds
        )
        time.sleep(spec.slow_seconds)
    if spec.fail_step_once == step.step_id and step.attempt == 1:
        raise TemporaryProviderError(
            f"the model provider is unavailable (fail_step_once={step.step_id}: only the first "
            "attempt fails)"
        )
    return step


def _stream(spec: AgentInput, step: StepContext, text: str) -> str:
    """Stream `text` on the run's output stream token by token as the model produces it, and
    return it (the step's result carries it whole). `crash_mid_stream` ends the worker process
    here, on the step's first attempt, after a few tokens."""
    crash = spec.crash_mid_stream == step.step_id and step.attempt == 1
    for count, token in enumerate(_model.stream(text), 1):
        step.emit(token)
        if crash and count == CRASH_AFTER_TOKENS:
            time.sleep(CRASH_GRACE_SECONDS)
            log.warning(
                "research_agent %s: crash_mid_stream: %s streamed %d tokens; the worker exits "
                "now, in the middle of its answer",
                step.workflow_id,
                step.step_id,
                count,
            )
            logging.shutdown()
            os._exit(CRASH_EXIT_CODE)
    return text


# -- the steps (sync functions: the SDK runs them in a thread) -----------------------------------


def create_plan(spec: AgentInput) -> dict[str, Any]:
    """Ask the model for research questions."""
    _enter(spec)
    return _model.plan(spec.topic)


def research(spec: AgentInput, question: str) -> dict[str, Any]:
    """Research one question."""
    _enter(spec)
    return _model.research(spec.topic, question)


def analyze(spec: AgentInput, notes: list[dict[str, Any]]) -> dict[str, Any]:
    """Find what the research says, streaming the summary."""
    step = _enter(spec)
    analysis = _model.analyze(spec.topic, notes)
    _stream(spec, step, analysis["summary"])
    return analysis


def recommend(spec: AgentInput, analysis: dict[str, Any]) -> dict[str, Any]:
    """Turn the analysis into a recommendation."""
    _enter(spec)
    return _model.recommend(spec.topic, analysis)


def write_report(
    spec: AgentInput,
    plan: dict[str, Any],
    notes: list[dict[str, Any]],
    analysis: dict[str, Any],
    recommendation: dict[str, Any],
    comment: str,
) -> dict[str, Any]:
    """Write the final report, streaming its body."""
    step = _enter(spec)
    report = _model.report(spec.topic, plan, notes, analysis, recommendation, comment)
    _stream(spec, step, report["body"])
    return report


def notify(spec: AgentInput, report: dict[str, Any]) -> dict[str, Any]:
    """Send the report once, through the reservation table (see `notifications`)."""
    step = _enter(spec)
    outcome = send_once(
        idempotency_key=step.idempotency_key,
        workflow_id=step.workflow_id,
        fence=step.fence,
        recipient=RECIPIENT,
        subject=report["title"],
        body=report["body"],
    )
    if outcome.sent_now and spec.crash_after_notification:
        log.warning(
            "research_agent %s: crash_after_notification: message %d sent and reserved as "
            "'sent'; the worker exits now, before the step is recorded",
            step.workflow_id,
            outcome.message_id,
        )
        logging.shutdown()
        os._exit(CRASH_EXIT_CODE)
    if outcome.sent_now:
        delivery = "sent"
    elif outcome.found == "sent":
        delivery = "already sent: the reservation was 'sent', the provider was not called"
    else:
        delivery = "already sent: the provider dropped the duplicate of the same key"
    log.info(
        "research_agent %s: notification %d: %s", step.workflow_id, outcome.message_id, delivery
    )
    return {
        "message_id": outcome.message_id,
        "recipient": RECIPIENT,
        "idempotency_key": step.idempotency_key,
        "delivery": delivery,
    }


# -- model calls under a budget ----------------------------------------------------------------

# The model steps by name, as the remote step `model` runs them.
MODEL_STEPS: dict[str, Callable[..., dict[str, Any]]] = {
    "create_plan": create_plan,
    "research": research,
    "analyze": analyze,
    "recommend": recommend,
    "report": write_report,
}


async def _model_step(
    ctx: WorkflowContext, spec: AgentInput, name: str, step_id: str, *args: Any
) -> dict[str, Any]:
    """A model call: the local step `step_id`, or, with `model_tokens`, the remote step
    `model` declaring its estimate under MODEL_KEY (its budget's and the run's)."""
    if spec.model_tokens is None:
        return dict(await ctx.step(step_id, MODEL_STEPS[name], spec, *args))
    call = {"name": name, "spec": spec.to_json(), "args": list(args)}
    estimate = Usage(units=spec.model_tokens)
    return dict(await ctx.call("model", call, keys=[MODEL_KEY], estimate=estimate, retry=RETRY))


@remote_step(name="model")
def model_call(call: dict[str, Any]) -> dict[str, Any]:
    """A model call as a remote step: run it, then report the tokens it used and their cost
    from the provider's usage (OpenAI's shape, which the offline model speaks too)."""
    args = call["args"]
    result = MODEL_STEPS[call["name"]](AgentInput.parse(call["spec"]), *args)
    response = {"model": _model.name, "usage": _model.usage(json.dumps(args), json.dumps(result))}
    report_model_usage(response, PRICES)
    return result


# -- the workflow ---------------------------------------------------------------------------------


# What a release of the agent may add between the research and its analysis: it gets the
# research notes and returns those the analysis uses (see `release_2`).
Review = Callable[[WorkflowContext, AgentInput, list[dict[str, Any]]], Awaitable[list[Any]]]


@workflow(retry=RETRY)
async def research_agent(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Research a topic, ask a human to approve the recommendation, then report and notify."""
    return await run_agent(ctx, params)


async def run_agent(
    ctx: WorkflowContext, params: Any, review: Review | None = None
) -> dict[str, Any]:
    """The agent's whole run, with `review` of the research notes if a release adds one."""
    spec = AgentInput.parse(params)
    try:
        return await _research(ctx, spec, review)
    except WorkflowCancelledError:  # `perdure workflow cancel`: say so, then end as CANCELLED
        await ctx.set_state("phase", "cancelled")
        raise
    except BudgetExceededError as refused:  # a model call its budget has no room for
        await ctx.set_state("phase", "out_of_budget")
        await ctx.set_state("stopped_by", str(refused))
        raise


async def _research(
    ctx: WorkflowContext, spec: AgentInput, review: Review | None
) -> dict[str, Any]:
    await ctx.set_state("phase", "planning")
    plan = await _model_step(ctx, spec, "create_plan", "create_plan")

    await ctx.set_state("phase", "researching")
    first = await _model_step(ctx, spec, "research", "research_1", plan["questions"][0])
    second = await _model_step(ctx, spec, "research", "research_2", plan["questions"][1])

    notes = [first, second] if review is None else await review(ctx, spec, [first, second])

    await ctx.set_state("phase", "analyzing")
    analysis = await _model_step(ctx, spec, "analyze", "analyze", notes)

    await ctx.set_state("phase", "recommending")
    recommendation = await _model_step(ctx, spec, "recommend", "recommend", analysis)
    await ctx.set_state("recommendation", recommendation)

    await ctx.set_state("phase", "awaiting_approval")
    how = f"perdure approve {ctx.workflow_id} [--reject] [--reason TEXT]"
    await ctx.set_state("waiting_for", {"approval": APPROVAL_NAME, "how": how})
    try:
        decided = await ctx.approval(
            APPROVAL_NAME,
            {"topic": spec.topic, "recommendation": recommendation},
            timeout=spec.approval_timeout,
        )
    except ApprovalExpiredError as expired:  # nobody decided in time: nothing is reported
        await ctx.set_state("waiting_for", None)
        await ctx.set_state("phase", "approval_expired")
        return {
            "topic": spec.topic,
            "decision": "expired",
            "comment": f"no decision by {expired.expires_at}",
            "recommendation": recommendation,
        }
    decision = "approved" if decided.approved else "rejected"
    comment = decided.reason
    await ctx.set_state("waiting_for", None)
    await ctx.set_state(
        "approval", {"decision": decision, "comment": comment, "decided_by": decided.decided_by}
    )
    if decision == "rejected":
        await ctx.set_state("phase", "rejected")
        return {
            "topic": spec.topic,
            "decision": decision,
            "comment": comment,
            "recommendation": recommendation,
        }

    await ctx.set_state("phase", "reporting")
    report = await _model_step(
        ctx, spec, "report", "report", plan, notes, analysis, recommendation, comment
    )

    await ctx.set_state("phase", "notifying")
    if spec.notify_queue is None:
        notification = await ctx.step("notify", notify, spec, report)
    else:  # executed by another worker, perhaps in another language
        message = {"recipient": RECIPIENT, "subject": report["title"], "message": report["body"]}
        notification = await ctx.call("notify", message, task_queue=spec.notify_queue)
    await ctx.set_state("phase", "done")
    return {
        "topic": spec.topic,
        "decision": decision,
        "comment": comment,
        "recommendation": recommendation,
        "report": report,
        "notification": notification,
    }
