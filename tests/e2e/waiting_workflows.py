"""Workflows of tests/e2e/test_waiting.py: retries, timers, signals, cancellation, published
state and step progress. Every step body appends a line "<what> <attempt> <pid>" to a ledger
file the test owns, so the test sees each attempt, in whichever process it ran."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

from perdure.worker import (
    RetryPolicy,
    SignalTimeoutError,
    StepFailedError,
    WorkflowCancelledError,
    WorkflowContext,
    current_step,
    workflow,
)
from tests.e2e.workflows import GATE_TIMEOUT, note, wait_for_file


def record(ledger: str, what: str) -> int:
    """A step body: note the attempt and return the pid that ran it."""
    note(ledger, f"{what} {current_step().attempt} {os.getpid()}")
    return os.getpid()


def wait_for_gate(ledger: str, what: str, gate: str) -> int:
    """A step body that notes its start, then waits until the test creates the gate file."""
    note(ledger, f"start-{what} {current_step().attempt} {os.getpid()}")
    wait_for_file(gate)
    return record(ledger, what)


def fail_until(ledger: str, what: str, succeed_on: int) -> int:
    """Fails every attempt before attempt `succeed_on` (0: every attempt)."""
    attempt = current_step().attempt
    record(ledger, what)
    if succeed_on and attempt >= succeed_on:
        return attempt
    raise ConnectionError(f"{what}: attempt {attempt} failed")


def rejected(ledger: str, what: str) -> None:
    """Fails with an error the caller declared non-retryable (a LookupError)."""
    record(ledger, what)
    raise KeyError(f"{what}: no such item")


async def slow_on(ledger: str, what: str, slow_attempts: int) -> int:
    """Hangs on attempts up to `slow_attempts` (the step's timeout ends them), then returns."""
    attempt = current_step().attempt
    record(ledger, what)
    if attempt <= slow_attempts:
        await asyncio.sleep(GATE_TIMEOUT)
    return attempt


def sleeps(ledger: str, what: str, seconds: float) -> int:
    """A sync step that takes `seconds` (its thread cannot be stopped; a late result is
    ignored)."""
    record(ledger, what)
    time.sleep(seconds)
    return current_step().attempt


# -- retries -----------------------------------------------------------------------------------


@workflow
async def retrying(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """Step `fetch` fails until attempt `succeed_on`, on the schedule given by the input."""
    policy = RetryPolicy(
        initial_interval=params["initial"],
        backoff_coefficient=params["backoff"],
        maximum_interval=params["maximum"],
        maximum_attempts=10,
    )
    attempt = await ctx.step(
        "fetch", fail_until, params["ledger"], "fetch", params["succeed_on"], retry=policy
    )
    after = await ctx.step("after", record, params["ledger"], "after")
    return {"attempt": attempt, "after_pid": after}


@workflow(retry=RetryPolicy(initial_interval=0.5, backoff_coefficient=1.0, maximum_attempts=3))
async def gives_up(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """One step exhausts the workflow's default policy, another fails with a non-retryable
    error; the code catches both StepFailedErrors and compensates each."""
    ledger = params["ledger"]
    outcome: dict[str, Any] = {}
    try:
        await ctx.step("charge", fail_until, ledger, "charge", 0)
    except StepFailedError as error:
        outcome["charge"] = [error.step_id, error.error_type, error.message]
        await ctx.step("refund", record, ledger, "refund")
    try:
        await ctx.step(
            "reserve",
            rejected,
            ledger,
            "reserve",
            retry=RetryPolicy(initial_interval=0.5, non_retryable_error_types=("LookupError",)),
        )
    except StepFailedError as error:
        outcome["reserve"] = [error.step_id, error.error_type, error.message]
        await ctx.step("release", record, ledger, "release")
    return outcome


@workflow
async def times_out(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """`slow` (async) hangs on its first attempt only; `stuck` (sync, in a thread) takes
    longer than its timeout on every attempt."""
    ledger = params["ledger"]
    policy = RetryPolicy(initial_interval=0.5, maximum_attempts=2)
    slow = await ctx.step("slow", slow_on, ledger, "slow", 1, retry=policy, timeout=0.5)
    try:
        await ctx.step("stuck", sleeps, ledger, "stuck", 3.0, retry=policy, timeout=0.5)
    except StepFailedError as error:
        return {"slow": slow, "stuck": [error.error_type, error.message]}
    return {"slow": slow, "stuck": None}


# -- timers ------------------------------------------------------------------------------------


@workflow
async def napper(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """A step, a durable sleep, a step."""
    await ctx.step("before", record, params["ledger"], "before")
    await ctx.sleep(params["seconds"])
    return int(await ctx.step("after", record, params["ledger"], "after"))


@workflow
async def alarm(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, str]:
    """Sleeps until a moment computed from the recorded clock, then "until" a past moment
    (which does not suspend), then runs a step."""
    started = await ctx.now()
    fire = started + timedelta(seconds=params["seconds"])
    await ctx.sleep_until(fire)
    await ctx.sleep_until(started)
    await ctx.step("after", record, params["ledger"], "after")
    return {"started": started.isoformat(), "fire": fire.isoformat()}


# -- signals -----------------------------------------------------------------------------------


@workflow
async def two_signals(ctx: WorkflowContext) -> list[Any]:
    """Waits for "go", then for "early" (which the test sends before "go")."""
    go = await ctx.wait_for_signal("go")
    early = await ctx.wait_for_signal("early")
    return [go, early]


@workflow
async def steering(ctx: WorkflowContext) -> dict[str, Any]:
    """Waits for "go", then takes every pending "item", then drains again (nothing left)."""
    await ctx.wait_for_signal("go")
    items = await ctx.drain_signals("item")
    again = await ctx.drain_signals("item")
    return {"items": items, "again": again}


@workflow
async def collector(ctx: WorkflowContext, params: Any) -> dict[str, Any]:
    """Consumes two "item" signals; returns them with its input."""
    first = await ctx.wait_for_signal("item")
    second = await ctx.wait_for_signal("item")
    return {"input": params, "items": [first, second]}


@workflow
async def deadline(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """A wait with a timeout that gets its signal, then one that times out."""
    approved = await ctx.wait_for_signal("approve", timeout=GATE_TIMEOUT)
    try:
        escalated = await ctx.wait_for_signal("escalate", timeout=params["timeout"])
    except SignalTimeoutError as error:
        escalated = f"{type(error).__name__}: {error}"
    return {"approved": approved, "escalated": escalated}


@workflow
async def wait_then_record(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """Waits for "go", then runs a step."""
    await ctx.wait_for_signal("go")
    return int(await ctx.step("after", record, params["ledger"], "after"))


@workflow
async def quick(ctx: WorkflowContext, params: dict[str, Any]) -> list[int]:
    """Two steps, no waiting."""
    one = await ctx.step("one", record, params["ledger"], "one")
    two = await ctx.step("two", record, params["ledger"], "two")
    return [one, two]


# -- cancellation and termination --------------------------------------------------------------


@workflow
async def order(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Reserve; optionally a step that waits for a gate; wait for approval; ship. Cancelled,
    it releases the reservation and ends cancelled."""
    ledger = params["ledger"]
    await ctx.step("reserve", record, ledger, "reserve")
    try:
        if params.get("gate"):
            await ctx.step("work", wait_for_gate, ledger, "work", params["gate"])
        await ctx.wait_for_signal("approve")
        await ctx.step("ship", record, ledger, "ship")
    except WorkflowCancelledError:
        await ctx.step("release", record, ledger, "release")
        raise
    return "shipped"


@workflow
async def sleepy_order(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Reserve, sleep a long time, ship. Cancelled, it releases the reservation."""
    ledger = params["ledger"]
    await ctx.step("reserve", record, ledger, "reserve")
    try:
        await ctx.sleep(params["seconds"])
        await ctx.step("ship", record, ledger, "ship")
    except WorkflowCancelledError:
        await ctx.step("release", record, ledger, "release")
        raise
    return "shipped"


# -- published state and describe --------------------------------------------------------------


@workflow
async def inspected(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """Publishes state, completes a step, then waits a long time for the retry of another."""
    ledger = params["ledger"]
    await ctx.set_state("phase", "planning")
    await ctx.step("plan", record, ledger, "plan")
    await ctx.set_state("phase", "charging")
    await ctx.set_state("progress", {"done": 1, "of": 2})
    slow_retry = RetryPolicy(initial_interval=600, maximum_interval=600, maximum_attempts=3)
    await ctx.step("charge", fail_until, ledger, "charge", 0, retry=slow_retry)
    return "unreachable in the test"


@workflow
async def awaiting_approval(ctx: WorkflowContext) -> Any:
    """Publishes state, then waits for approval with a long timeout."""
    await ctx.set_state("phase", "awaiting approval")
    return await ctx.wait_for_signal("approve", timeout=600)


# -- heartbeats --------------------------------------------------------------------------------


def process_items(ctx: WorkflowContext, ledger: str, gate: str, total: int) -> dict[str, Any]:
    """A long sync step: resumes after the last item its earlier attempt reported, reports
    each item done; half-way it waits for the gate (the test kills the worker there)."""
    step = current_step()
    start = (step.heartbeat_details or {}).get("next", 0)
    note(ledger, f"resume {start} {step.attempt} {os.getpid()}")
    for item in range(start, total):
        note(ledger, f"item {item} {os.getpid()}")
        ctx.heartbeat({"next": item + 1})
        if item + 1 == total // 2:
            wait_for_gate(ledger, "half", gate)
    return {"resumed_from": start, "pid": os.getpid()}


@workflow
async def long_job(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """One long step that heartbeats its progress."""
    result: dict[str, Any] = await ctx.step(
        "process", process_items, ctx, params["ledger"], params["gate"], params["total"]
    )
    return result


async def crunch(ctx: WorkflowContext, ledger: str, total: int) -> dict[str, Any]:
    """An async step: resumes after the last item reported; its first attempt fails half-way."""
    step = current_step()
    start = (step.heartbeat_details or {}).get("next", 0)
    note(ledger, f"resume {start} {step.attempt} {os.getpid()}")
    for item in range(start, total):
        note(ledger, f"item {item} {os.getpid()}")
        ctx.heartbeat({"next": item + 1})
        if step.attempt == 1 and item + 1 == total // 2:
            raise ConnectionError(f"lost the connection after item {item}")
    return {"resumed_from": start, "attempt": step.attempt}


@workflow
async def resumes_after_failure(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """One step whose first attempt fails after reporting progress."""
    result: dict[str, Any] = await ctx.step(
        "crunch",
        crunch,
        ctx,
        params["ledger"],
        params["total"],
        retry=RetryPolicy(initial_interval=0.5),
    )
    return result
