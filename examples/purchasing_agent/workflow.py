"""The purchasing agent: the agent toolkit in one workflow.

It buys an item for a team:

1. **plans** with a model call (`ctx.model_call`): the model, tokens and cost are journaled
   with the step, and the run's budget reserves each call's bound before it runs;
2. **delegates** a quote to each vendor as a **child workflow** (`ctx.start_child`, all at
   once, then `ctx.gather`): each child is a run of its own, linked to this one both ways;
3. asks a person for an **approval** (`ctx.approval`) of the cheapest quote, bound to its
   details, escalated to an admin after `escalate_after` seconds and expiring after
   `approval_timeout`: an expired approval ends the run as `expired`, a rejection as
   `rejected`;
4. **purchases** in a **saga** (`ctx.saga`): it holds the funds, places the order and books
   the delivery; if a later step fails (the switch `fail_delivery`), the order is cancelled
   and the funds released, last first, once each, and the run ends as `compensated`;
5. writes a summary with a second model call.

Started with a budget (`budget=Budget(units=...)`, `on_budget_exceeded="fail"`), a model call
that does not fit fails without running and the run ends as `out_of_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from examples.inputs import input_fields
from examples.models import model_client
from examples.purchasing_agent import suppliers
from perdure.worker import (
    ApprovalExpiredError,
    BudgetExceededError,
    ModelPrices,
    RetryPolicy,
    StepFailedError,
    WorkflowContext,
    current_step,
    model_step,
    model_text,
    workflow,
)

MODEL = "offline-chat-1"
# What the model's tokens cost: USD 0.15 per million input tokens, 0.60 per million output.
PRICES = ModelPrices(input_micros_per_million=150_000, output_micros_per_million=600_000)
RETRY = RetryPolicy(initial_interval=1.0, backoff_coefficient=2.0, maximum_attempts=3)
DEFAULT_VENDORS = ("acme", "globex", "initech")
MAX_VENDORS = 10

# The worker's model step: the examples' client (offline unless PERDURE_MODEL_URL is set).
answer_model_calls = model_step(model_client(), {MODEL: PRICES})


@dataclass(frozen=True)
class PurchaseInput:
    """What to buy, from whom, and how long a person has to approve."""

    item: str = "a GPU server"
    vendors: tuple[str, ...] = DEFAULT_VENDORS
    approval_timeout: float = 3600.0  # seconds until the approval expires
    escalate_after: float = 600.0  # seconds until an admin may decide it too
    fail_delivery: bool = False  # no carrier: the saga compensates

    @classmethod
    def parse(cls, raw: Any) -> PurchaseInput:
        fields = input_fields(
            raw, ("item", "vendors", "approval_timeout", "escalate_after", "fail_delivery")
        )
        if fields is None:
            return cls()
        spec = cls(
            item=str(fields.get("item", cls.item)),
            vendors=tuple(fields.get("vendors", DEFAULT_VENDORS)),
            approval_timeout=float(fields.get("approval_timeout", cls.approval_timeout)),
            escalate_after=float(fields.get("escalate_after", cls.escalate_after)),
            fail_delivery=bool(fields.get("fail_delivery", False)),
        )
        if not 1 <= len(spec.vendors) <= MAX_VENDORS or not all(
            isinstance(v, str) and v.isidentifier() for v in spec.vendors
        ):
            raise ValueError(f"vendors must be 1 to {MAX_VENDORS} names like 'acme'")
        if not 0 < spec.escalate_after < spec.approval_timeout:
            raise ValueError("escalate_after must be positive and less than approval_timeout")
        return spec


# -- the vendor's child workflow ------------------------------------------------------------------


def ask_vendor(vendor: str, item: str) -> dict[str, Any]:
    """A vendor's quote (its price in micros), the same however often it is asked."""
    return {"vendor": vendor, "item": item, "price_micros": suppliers.quote(vendor, item)}


@workflow(retry=RETRY)
async def vendor_quote(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """A child run: one vendor's quote."""
    return dict(await ctx.step("ask_vendor", ask_vendor, params["vendor"], params["item"]))


# -- the saga's steps and their compensations -----------------------------------------------------


def _effect(action: str, detail: str) -> str:
    step = current_step()
    suppliers.apply(step.idempotency_key, step.workflow_id, action, detail)
    return action


def hold_funds(amount_micros: int) -> str:
    return _effect("hold_funds", f"{amount_micros} micros")


def release_funds(amount_micros: int) -> str:
    return _effect("release_funds", f"{amount_micros} micros")


def place_order(vendor: str, item: str) -> str:
    return _effect("place_order", f"{item} from {vendor}")


def cancel_order(vendor: str, item: str) -> str:
    return _effect("cancel_order", f"{item} from {vendor}")


def book_delivery(vendor: str, fail: bool) -> str:
    if fail:
        raise suppliers.DeliveryUnavailableError(f"no carrier can collect from {vendor}")
    return _effect("book_delivery", f"from {vendor}")


# -- the agent ------------------------------------------------------------------------------------


async def _ask(ctx: WorkflowContext, prompt: str) -> str:
    response = await ctx.model_call(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You are a careful purchasing assistant."},
            {"role": "user", "content": prompt},
        ],
        max_tokens=60,
        prices=PRICES,
    )
    return model_text(response)


@workflow(retry=RETRY)
async def purchasing_agent(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Plan, get quotes from child runs, ask for approval, then buy under a saga."""
    spec = PurchaseInput.parse(params)
    try:
        return await _purchase(ctx, spec)
    except BudgetExceededError as refused:  # a model call its budget has no room for
        await ctx.set_state("phase", "out_of_budget")
        return {"status": "out_of_budget", "stopped_by": str(refused)}


async def _purchase(ctx: WorkflowContext, spec: PurchaseInput) -> dict[str, Any]:
    await ctx.set_state("phase", "planning")
    plan = await _ask(ctx, f"What matters when buying {spec.item}?")

    await ctx.set_state("phase", "quoting")
    handles = [
        await ctx.start_child("vendor_quote", {"vendor": vendor, "item": spec.item})
        for vendor in spec.vendors
    ]
    quotes = await ctx.gather(*handles)
    best = min(quotes, key=lambda quote: (quote["price_micros"], quote["vendor"]))

    await ctx.set_state("phase", "awaiting_approval")
    details = {"item": spec.item, "vendor": best["vendor"], "price_micros": best["price_micros"]}
    try:
        decision = await ctx.approval(
            "purchase",
            details,
            timeout=spec.approval_timeout,
            escalate_after=spec.escalate_after,
            on_escalated=lambda _: ctx.set_state("phase", "escalated"),
        )
    except ApprovalExpiredError as expired:
        await ctx.set_state("phase", "expired")
        return {"status": "expired", "quotes": quotes, "expired": str(expired)}
    if not decision.approved:
        await ctx.set_state("phase", "rejected")
        return {"status": "rejected", "by": decision.decided_by, "reason": decision.reason}

    await ctx.set_state("phase", "purchasing")
    amount, vendor = best["price_micros"], best["vendor"]
    try:
        async with ctx.saga() as saga:
            await ctx.step("hold_funds", hold_funds, amount)
            saga.add_compensation("release_funds", release_funds, amount)
            await ctx.step("place_order", place_order, vendor, spec.item)
            saga.add_compensation("cancel_order", cancel_order, vendor, spec.item)
            await ctx.step("book_delivery", book_delivery, vendor, spec.fail_delivery)
    except StepFailedError as failed:  # compensated: the order cancelled, the funds released
        await ctx.set_state("phase", "compensated")
        return {"status": "compensated", "error": failed.message, "vendor": vendor}

    summary = await _ask(ctx, f"Summarize buying {spec.item} from {vendor}. Plan: {plan}")
    await ctx.set_state("phase", "purchased")
    return {
        "status": "purchased",
        "vendor": vendor,
        "price_micros": amount,
        "approved_by": decision.decided_by,
        "quotes": quotes,
        "summary": summary,
    }
