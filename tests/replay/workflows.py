"""The workflows and remote steps the replay cases (tests/replay/cases/*.json) run, by name,
one line of spec each. Every SDK's replay runner registers the same ones under the same names,
written to these specs (the Node.js SDK's: sdk/node/test/replay/workflows.js), so that one
journal gives the same calls in every language.

Errors a spec "raises" are of a class (Python) or with a `name` (JavaScript) of that type name.
Step bodies return at once: a case never depends on how long anything takes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from perdure.worker import (
    ApprovalEscalation,
    ApprovalExpiredError,
    BudgetExceededError,
    ModelPrices,
    RetryPolicy,
    SignalTimeoutError,
    StepFailedError,
    Turn,
    TurnResult,
    Usage,
    WorkflowCancelledError,
    WorkflowContext,
    model_step,
    remote_step,
    workflow,
)
from perdure.worker._registry import (
    StepFunction,
    WorkflowFunction,
    remote_step_name,
    workflow_name,
)

# Retries in the cases: attempt n fails, the next one is due 1s, 2s, 4s... later; 3 attempts.
RETRY = RetryPolicy(initial_interval=1.0, backoff_coefficient=2.0, maximum_attempts=3)
NO_RETRY = RetryPolicy(maximum_attempts=1)


class PaymentDeclinedError(Exception):
    """A step's own error (type name "PaymentDeclined")."""


PaymentDeclinedError.__name__ = "PaymentDeclined"


class ImageTooLargeError(Exception):
    """A remote step's own error (type name "ImageTooLarge")."""


ImageTooLargeError.__name__ = "ImageTooLarge"


class OrderRejectedError(Exception):
    """A workflow's own error (type name "OrderRejected")."""


OrderRejectedError.__name__ = "OrderRejected"


def declined() -> None:
    raise PaymentDeclinedError("card declined")


@workflow(name="two_steps")
async def two_steps(ctx: WorkflowContext) -> list[str]:
    """Step "reserve" returns "reserved", step "charge" returns "charged"; returns both."""
    return [
        await ctx.step("reserve", lambda: "reserved"),
        await ctx.step("charge", lambda: "charged"),
    ]


@workflow(name="repeat")
async def repeat(ctx: WorkflowContext) -> list[int]:
    """Step "ping" three times, returning 1, 2, 3 (step ids ping, ping#2, ping#3); returns
    the three results."""
    return [await ctx.step("ping", lambda n=n: n) for n in (1, 2, 3)]


@workflow(name="flaky", retry=RETRY)
async def flaky(ctx: WorkflowContext) -> str:
    """Step "charge" (policy: 1s initial interval, backoff 2, 3 attempts) raises
    PaymentDeclined("card declined") on every attempt; uncaught; returns "paid" if it ever
    returns."""
    await ctx.step("charge", declined)
    return "paid"


@workflow(name="compensate", retry=NO_RETRY)
async def compensate(ctx: WorkflowContext) -> dict[str, str]:
    """Step "charge" (1 attempt) raises PaymentDeclined("card declined"); the workflow catches
    the step's failure, runs step "refund" returning "refunded", and returns
    {"failed": <the failure's type>, "refund": "refunded"}."""
    try:
        await ctx.step("charge", declined)
    except StepFailedError as error:
        refund = await ctx.step("refund", lambda: "refunded")
        return {"failed": error.error_type, "refund": refund}
    return {"failed": "", "refund": ""}


@workflow(name="reject")
async def reject(ctx: WorkflowContext) -> None:
    """Raises OrderRejected("out of stock") without a durable call."""
    raise OrderRejectedError("out of stock")


@workflow(name="echo")
async def echo(ctx: WorkflowContext, value: Any) -> Any:
    """Step "echo" returns the input unchanged; returns the step's result."""
    return await ctx.step("echo", lambda: value)


@workflow(name="nap")
async def nap(ctx: WorkflowContext) -> str:
    """Sleeps 60 seconds (ctx.sleep), then step "wake" returns "awake"; returns it."""
    await ctx.sleep(60)
    return str(await ctx.step("wake", lambda: "awake"))


@workflow(name="nap_until")
async def nap_until(ctx: WorkflowContext) -> str:
    """Sleeps until 2030-01-02T00:00:00Z (ctx.sleep_until); returns "morning"."""
    await ctx.sleep_until(datetime(2030, 1, 2, tzinfo=UTC))
    return "morning"


@workflow(name="approval")
async def approval(ctx: WorkflowContext) -> Any:
    """Waits for signal "approve" (no timeout); returns its payload."""
    return await ctx.wait_for_signal("approve")


@workflow(name="sign_off")
async def sign_off(ctx: WorkflowContext) -> Any:
    """Asks approval "deploy" of {"v": 2} (timeout 60 s, approvers ["operator"], escalating
    after 30 s to ["admin"]); on escalation sets state "escalated" to the approval's id; returns
    {"approved", "by", "reason"} of the decision, or "expired" when it expires."""

    async def escalated(escalation: ApprovalEscalation) -> None:
        await ctx.set_state("escalated", escalation.approval_id)

    try:
        decision = await ctx.approval(
            "deploy",
            {"v": 2},
            timeout=60,
            escalate_after=30,
            approvers=["operator"],
            escalate_to=["admin"],
            on_escalated=escalated,
        )
    except ApprovalExpiredError:
        return "expired"
    return {"approved": decision.approved, "by": decision.decided_by, "reason": decision.reason}


@workflow(name="turns")
async def turns(ctx: WorkflowContext, state: dict[str, Any]) -> dict[str, Any]:
    """Takes signals "msg" one per turn into `seen` (from state {"seen", "limit"}); before a
    turn, once ctx.info.history_length reaches `limit`, continues as new with {"seen", "limit"};
    with 3 seen, returns {"seen", "length": history_length}."""
    seen = list(state["seen"])
    while True:
        if ctx.info.history_length >= state["limit"]:
            await ctx.continue_as_new({"seen": seen, "limit": state["limit"]})
        seen.append(await ctx.wait_for_signal("msg"))
        if len(seen) >= 3:
            return {"seen": seen, "length": ctx.info.history_length}


@workflow(name="approval_twice")
async def approval_twice(ctx: WorkflowContext) -> list[Any]:
    """Waits for signal "approve" twice; returns both payloads in order."""
    return [await ctx.wait_for_signal("approve"), await ctx.wait_for_signal("approve")]


@workflow(name="approval_timeout")
async def approval_timeout(ctx: WorkflowContext) -> Any:
    """Waits for signal "approve" with a 30-second timeout; returns its payload, or
    "timed out" on the timeout."""
    try:
        return await ctx.wait_for_signal("approve", timeout=30)
    except SignalTimeoutError:
        return "timed out"


@workflow(name="drain")
async def drain(ctx: WorkflowContext) -> list[Any]:
    """Drains signal "item" (ctx.drain_signals); returns the payloads, oldest first."""
    return await ctx.drain_signals("item")


@workflow(name="staged")
async def staged(ctx: WorkflowContext) -> str:
    """Sets state "stage" to "started", runs step "work" returning 1, sets "stage" to
    "done"; returns "ok"."""
    await ctx.set_state("stage", "started")
    await ctx.step("work", lambda: 1)
    await ctx.set_state("stage", "done")
    return "ok"


@workflow(name="remote", retry=RETRY)
async def remote(ctx: WorkflowContext) -> Any:
    """Calls remote step "resize" with input {"width": 10} on the workflow's task queue
    (retry: the workflow's policy, 1s initial interval, backoff 2, 60s maximum interval, 3
    attempts); returns its result."""
    return await ctx.call("resize", {"width": 10})


@workflow(name="budgeted", retry=RETRY)
async def budgeted(ctx: WorkflowContext) -> Any:
    """Calls remote step "resize" with input {"width": 10}, keys ["provider:openai",
    "tenant:acme"] and estimate 2000 units, 30000 cost micros; returns its result, or, when it
    raises BudgetExceededError, "over budget: " followed by the error's message."""
    try:
        return await ctx.call(
            "resize",
            {"width": 10},
            keys=["provider:openai", "tenant:acme"],
            estimate=Usage(units=2000, cost_micros=30_000),
        )
    except BudgetExceededError as error:
        return f"over budget: {error.message}"


@workflow(name="fan_out", retry=RETRY)
async def fan_out(ctx: WorkflowContext) -> list[Any]:
    """Gathers remote steps "left" (input 1) and "right" (input 2) on task queue "pool";
    returns both results in call order."""
    return await ctx.gather(
        ctx.call("left", 1, task_queue="pool"), ctx.call("right", 2, task_queue="pool")
    )


@workflow(name="cancellable")
async def cancellable(ctx: WorkflowContext) -> str:
    """Step "reserve" returns "reserved", sleeps 3600 seconds, step "ship" returns "shipped";
    on cancellation runs step "release" returning "released" and raises the cancellation
    again; returns "shipped"."""
    try:
        await ctx.step("reserve", lambda: "reserved")
        await ctx.sleep(3600)
        return str(await ctx.step("ship", lambda: "shipped"))
    except WorkflowCancelledError:
        await ctx.step("release", lambda: "released")
        raise


@workflow(name="oversized", retry=RETRY)
async def oversized(ctx: WorkflowContext) -> Any:
    """Step "report" (policy: 3 attempts) returns 40 lists nested in one another (deeper than
    history takes); returns the step's result."""
    return await ctx.step("report", lambda: nested(40))


def nested(depth: int) -> list[Any]:
    """`depth` empty lists, each in the one around it."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@workflow(name="measured")
async def measured(ctx: WorkflowContext) -> list[int]:
    """Step "a" returns "a"; notes ctx.info.history_length; ctx.set_state("k", 1); returns
    [the length noted, ctx.info.history_length]."""
    await ctx.step("a", lambda: "a")
    after_step = ctx.info.history_length
    await ctx.set_state("k", 1)
    return [after_step, ctx.info.history_length]


@workflow(name="unique")
async def unique(ctx: WorkflowContext) -> str:
    """ctx.uuid4(), then returns it."""
    return await ctx.uuid4()


@workflow(name="patched")
async def patched(ctx: WorkflowContext) -> dict[str, Any]:
    """Step "prepare" returns "prepared"; then if ctx.patched("v2"), step "fetch_v2" returns
    "new", else step "fetch" returns "old"; asks ctx.patched("v2") again; returns {"got": the
    fetch's result, "again": the second answer, "length": ctx.info.history_length}."""
    await ctx.step("prepare", lambda: "prepared")
    if ctx.patched("v2"):
        got = await ctx.step("fetch_v2", lambda: "new")
    else:
        got = await ctx.step("fetch", lambda: "old")
    again = ctx.patched("v2")
    return {"got": got, "again": again, "length": ctx.info.history_length}


@workflow(name="deprecated")
async def deprecated(ctx: WorkflowContext) -> str:
    """Step "prepare" returns "prepared"; ctx.deprecate_patch("v2"); step "fetch_v2" returns
    "new"; returns it."""
    await ctx.step("prepare", lambda: "prepared")
    ctx.deprecate_patch("v2")
    return str(await ctx.step("fetch_v2", lambda: "new"))


# The model calls' prices: 2.50 per million input tokens, 10.00 per million output tokens.
MODEL_PRICES = ModelPrices(input_micros_per_million=2_500_000, output_micros_per_million=10_000_000)


@workflow(name="ask_model", retry=RETRY)
async def ask_model(ctx: WorkflowContext) -> Any:
    """ctx.model_call(model "m-1", messages [{"role": "user", "content": "Hi"}], max_tokens 10,
    prices MODEL_PRICES); returns the response."""
    return await ctx.model_call(
        model="m-1",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=10,
        prices=MODEL_PRICES,
    )


class _FixedModel:
    """A client whose chat.completions.create always answers MODEL_ANSWER."""

    def __init__(self) -> None:
        self.chat = self
        self.completions = self

    def create(self, **_: Any) -> dict[str, Any]:
        return {
            "model": "m-1",
            "choices": [{"message": {"role": "assistant", "content": "Hello"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        }


# Remote step "model_call": model_step of a client that always answers {"model": "m-1",
# "choices": [{"message": {"role": "assistant", "content": "Hello"}}], "usage":
# {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}, at MODEL_PRICES.
model_call = model_step(_FixedModel(), {"m-1": MODEL_PRICES})


@remote_step(name="resize")
def resize(image: dict[str, Any]) -> dict[str, Any]:
    """Remote step: returns its input {"width": w} as {"width": w, "done": true}."""
    return {"width": image["width"], "done": True}


@remote_step(name="unreliable")
def unreliable(_: Any) -> None:
    """Remote step: raises ImageTooLarge("too large")."""
    raise ImageTooLargeError("too large")


@workflow(name="parent")
async def parent(ctx: WorkflowContext) -> Any:
    """Runs child workflow "adder" with input {"a": 2, "b": 3} (its default id, the workflow's
    task queue, parent close policy "terminate"); returns its result."""
    return await ctx.child("adder", {"a": 2, "b": 3})


@workflow(name="parent_of_two")
async def parent_of_two(ctx: WorkflowContext) -> list[Any]:
    """Starts child "adder" with input 1, id "kid-a", task queue "pool", policy "abandon", then
    child "adder" with input 2, id "kid-b", policy "request_cancel"; waits for both and returns
    their results in call order."""
    first = await ctx.start_child(
        "adder", 1, id="kid-a", task_queue="pool", parent_close_policy="abandon"
    )
    second = await ctx.start_child("adder", 2, id="kid-b", parent_close_policy="request_cancel")
    return await ctx.gather(first, second)


REMOTE_STEPS: dict[str, StepFunction] = {
    str(remote_step_name(fn)): fn for fn in (resize, unreliable, model_call)
}

WORKFLOWS: dict[str, WorkflowFunction] = {
    str(workflow_name(fn)): fn
    for fn in (
        two_steps,
        turns,
        repeat,
        flaky,
        compensate,
        reject,
        echo,
        nap,
        nap_until,
        approval,
        approval_twice,
        approval_timeout,
        sign_off,
        drain,
        staged,
        remote,
        budgeted,
        fan_out,
        cancellable,
        oversized,
        measured,
        unique,
        patched,
        deprecated,
        ask_model,
        parent,
        parent_of_two,
    )
}


@workflow(name="saga", retry=NO_RETRY)
async def saga(ctx: WorkflowContext) -> str:
    """In a saga (ctx.saga()): step "reserve" returns "reserved", then compensation "release"
    (returns "released") is added; step "charge" returns "charged", then compensation "refund"
    (returns "refunded") is added; step "ship" (1 attempt) raises PaymentDeclined("card
    declined"); returns "shipped" if it ever returns."""
    async with ctx.saga() as trip:
        await ctx.step("reserve", lambda: "reserved")
        trip.add_compensation("release", lambda: "released")
        await ctx.step("charge", lambda: "charged")
        trip.add_compensation("refund", lambda: "refunded")
        await ctx.step("ship", declined)
    return "shipped"


@workflow(name="saga_cancellable", retry=NO_RETRY)
async def saga_cancellable(ctx: WorkflowContext) -> str:
    """As "saga", with ctx.sleep(3600) in place of step "ship"; returns "slept"."""
    async with ctx.saga() as trip:
        await ctx.step("reserve", lambda: "reserved")
        trip.add_compensation("release", lambda: "released")
        await ctx.step("charge", lambda: "charged")
        trip.add_compensation("refund", lambda: "refunded")
        await ctx.sleep(3600)
    return "slept"


@workflow(name="agent_loop")
async def agent_loop(ctx: WorkflowContext, spec: dict[str, Any]) -> dict[str, Any]:
    """ctx.agent_loop with objective spec["objective"], max_turns spec["max_turns"], budget
    spec["budget"] (absent: none), is_met: the state has spec["target"] items, default
    signals ("steer", "abandon"); each turn runs step "work" returning the turn's objective,
    and returns TurnResult(state=the last state (or []) + [that result], units=10); returns
    the result's as_dict()."""

    async def take_turn(turn: Turn) -> TurnResult:
        objective = turn.objective
        worked = await ctx.step("work", lambda: objective)
        return TurnResult(state=[*(turn.state or []), worked], units=10)

    result = await ctx.agent_loop(
        take_turn,
        objective=spec["objective"],
        max_turns=spec["max_turns"],
        budget=spec.get("budget"),
        is_met=lambda state: len(state) >= spec["target"],
    )
    return result.as_dict()


WORKFLOWS.update({str(workflow_name(fn)): fn for fn in (saga, saga_cancellable, agent_loop)})
