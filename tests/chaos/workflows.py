"""The workflow the fault-injection suite runs. Its steps act on the outside world: a ledger in
the chaos schema, written straight to PostgreSQL (never through the proxy), which makes each
effect idempotent by the step's idempotency key, as a payment provider would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from psycopg_pool import ConnectionPool

from perdure.worker import RetryPolicy, StepFailedError, WorkflowContext, current_step, workflow

LEDGER_DSN_VARIABLE = "PERDURE_CHAOS_LEDGER_DSN"
SCHEMA = """
CREATE SCHEMA IF NOT EXISTS chaos;
-- Every execution of a step body, by whoever ran it: at-least-once shows here.
CREATE TABLE IF NOT EXISTS chaos.executions (
    key         text NOT NULL,
    workflow_id text NOT NULL,
    step        text NOT NULL,
    pid         int NOT NULL,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- The effects: at most one per idempotency key, whoever runs the step and however often.
CREATE TABLE IF NOT EXISTS chaos.effects (
    key         text PRIMARY KEY,
    workflow_id text NOT NULL,
    step        text NOT NULL,
    amount      int NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Every body of a long step, from its start to its end (returned, or cancelled when its
-- worker fenced itself): two bodies of one step must never overlap.
CREATE TABLE IF NOT EXISTS chaos.bodies (
    id          bigserial PRIMARY KEY,
    key         text NOT NULL,
    workflow_id text NOT NULL,
    pid         int NOT NULL,
    fence       bigint NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at    timestamptz,
    ending      text
);
"""
# Retries come quickly: the faults are short and the suite waits for every run to end.
RETRY = RetryPolicy(initial_interval=0.2, maximum_interval=2.0, maximum_attempts=0)

_pool: ConnectionPool | None = None


def _ledger() -> ConnectionPool:
    global _pool  # one pool per worker process, opened by its first step
    if _pool is None:
        _pool = ConnectionPool(
            os.environ[LEDGER_DSN_VARIABLE],
            min_size=1,
            max_size=4,
            kwargs={"autocommit": True},
            timeout=5,
        )
    return _pool


def apply_effect(step: str, amount: int, work_seconds: float, flaky: bool) -> dict[str, Any]:
    """Log the execution, do some work, then apply the effect once per idempotency key; return
    the effect that stands (this execution's or an earlier one's). A `flaky` step fails its
    first attempt at once: the journal gets failed attempts to record (and resend)."""
    running = current_step()
    if flaky and running.attempt == 1:
        raise RuntimeError(f"{step}: the first attempt fails")
    key = running.idempotency_key
    workflow_id = key.split(":", 1)[0]
    with _ledger().connection() as conn:
        conn.execute(
            "INSERT INTO chaos.executions (key, workflow_id, step, pid) VALUES (%s, %s, %s, %s)",
            [key, workflow_id, step, os.getpid()],
        )
    time.sleep(work_seconds)  # a fault can land while the step is in flight
    with _ledger().connection() as conn:
        conn.execute(
            "INSERT INTO chaos.effects (key, workflow_id, step, amount) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (key) DO NOTHING",
            [key, workflow_id, step, amount],
        )
        row = conn.execute(
            "SELECT amount, applied_at FROM chaos.effects WHERE key = %s", [key]
        ).fetchone()
    assert row is not None
    return {"key": key, "amount": row[0], "applied_at": row[1].isoformat()}


@workflow
async def ledger_run(ctx: WorkflowContext, params: dict[str, Any]) -> dict[str, Any]:
    """`steps` effects of amounts 1..steps (each failing once first if `flaky`), then an
    optional timer followed by one more effect, then `signals` signals "tick" taken one by
    one."""
    work = float(params.get("work_seconds", 0.05))
    flaky = bool(params.get("flaky"))
    total = 0
    for index in range(1, int(params["steps"]) + 1):
        effect = await ctx.step(
            f"effect-{index}", apply_effect, f"effect-{index}", index, work, flaky, retry=RETRY
        )
        total += effect["amount"]
    if params.get("sleep"):
        await ctx.sleep(float(params["sleep"]))
        await ctx.step("after-timer", apply_effect, "after-timer", 0, work, False, retry=RETRY)
    ticks = [await ctx.wait_for_signal("tick") for _ in range(int(params.get("signals", 0)))]
    return {"total": total, "ticks": ticks}


async def long_body(seconds: float, block_loop: bool) -> int:
    """Run for `seconds` (holding the event loop throughout when `block_loop`, as a careless
    async step would), logging start and end with pid and fence; return the fence."""
    step = current_step()
    with _ledger().connection() as conn:
        row = conn.execute(
            "INSERT INTO chaos.bodies (key, workflow_id, pid, fence) VALUES (%s, %s, %s, %s)"
            " RETURNING id",
            [step.idempotency_key, step.workflow_id, os.getpid(), step.fence],
        ).fetchone()
    assert row is not None
    ending = "cancelled"
    try:
        if block_loop:
            time.sleep(seconds)  # noqa: ASYNC251 (the careless step this stands for)
        else:
            await asyncio.sleep(seconds)
        ending = "returned"
    finally:
        with _ledger().connection() as conn:
            conn.execute(
                "UPDATE chaos.bodies SET ended_at = clock_timestamp(), ending = %s WHERE id = %s",
                [ending, row[0]],
            )
    return step.fence


@workflow
async def long_step_run(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """One long step (see long_body); returns the fence its body ran under."""
    seconds, block_loop = float(params["seconds"]), bool(params.get("block_loop"))
    fence: int = await ctx.step("long", long_body, seconds, block_loop, retry=RETRY)
    return fence


# Steps that break their worker, for the scenarios of attempt counting and time limits.
CRASH_RETRY = RetryPolicy(initial_interval=1.0, backoff_coefficient=2.0, maximum_attempts=3)
QUICK_RETRY = RetryPolicy(initial_interval=0.2, maximum_attempts=3)
ONE_ATTEMPT = RetryPolicy(maximum_attempts=1)
HANG_SECONDS = 30.0  # a hung body: abandoned long before it ends
ABANDONED_THREADS = 6


def crash_worker() -> None:
    """Kill the process running the step at once, as an OOM kill or a segfault would."""
    os._exit(70)


@workflow
async def crash_loop(ctx: WorkflowContext) -> None:
    """One step that kills every worker it runs on: it ends failed after CRASH_RETRY's
    attempts, with its backoff between them."""
    await ctx.step("crash", crash_worker, retry=CRASH_RETRY)


def _log_execution(step: str) -> None:
    key = current_step().idempotency_key
    with _ledger().connection() as conn:
        conn.execute(
            "INSERT INTO chaos.executions (key, workflow_id, step, pid) VALUES (%s, %s, %s, %s)",
            [key, key.split(":", 1)[0], step, os.getpid()],
        )


def hang_first_attempt() -> int:
    """Hang without a heartbeat on the first attempt; return this process's id on the next."""
    _log_execution("hang")
    if current_step().attempt == 1:
        time.sleep(HANG_SECONDS)
    return os.getpid()


@workflow
async def hung_step(ctx: WorkflowContext) -> int:
    """A step whose first attempt hangs: its heartbeat timeout fails it, and it is retried."""
    result: int = await ctx.step(
        "hang", hang_first_attempt, heartbeat_timeout=1.0, retry=QUICK_RETRY
    )
    return result


def hang() -> None:
    time.sleep(HANG_SECONDS)


@workflow
async def abandoned_threads(ctx: WorkflowContext) -> int:
    """Six sync steps that time out (their threads abandoned, still sleeping), then a seventh
    in the same lease, so on the same worker: it must start and end within its time limit."""
    for index in range(1, ABANDONED_THREADS + 1):
        with contextlib.suppress(StepFailedError):
            await ctx.step(f"hang-{index}", hang, timeout=0.2, retry=ONE_ATTEMPT)
    pid: int = await ctx.step("seventh", os.getpid, timeout=2.0, retry=ONE_ATTEMPT)
    return pid


def _output(size: int) -> str:
    return "x" * size


@workflow
async def bulky_run(ctx: WorkflowContext, params: dict[str, Any]) -> int:
    """`count` steps of `size` bytes of output each, then a short sleep: the run is loaded again
    with its whole journal."""
    for index in range(int(params["count"])):
        await ctx.step(f"output-{index}", _output, int(params["size"]))
    await ctx.sleep(0.5)
    return int(params["count"])


def speak(chunks: int, pause: float) -> str:
    """Stream words `pause` seconds apart, each naming the attempt ("2:17 "), and return them:
    `chunks` of them, or ten times as many on the first attempt, which the scenario always
    interrupts (however slow the machine, it cannot end first). A sync body, so a worker
    fenced out (its task cancelled) leaves its thread emitting, as a stale worker would. Each
    attempt logs the process running it."""
    _log_execution("speak")
    step = current_step()
    count = chunks * 10 if step.attempt == 1 else chunks
    words = [f"{step.attempt}:{index} " for index in range(count)]
    for word in words:
        step.emit(word)
        time.sleep(pause)
    return "".join(words)


@workflow
async def streaming_run(ctx: WorkflowContext, params: dict[str, Any]) -> str:
    """One step that streams text slowly (tests/chaos/streams.py)."""
    text: str = await ctx.step(
        "speak", speak, int(params["chunks"]), float(params["pause"]), retry=QUICK_RETRY
    )
    return text
