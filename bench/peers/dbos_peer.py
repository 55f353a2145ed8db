"""DBOS Transact measured with Perdure's shapes, on a fresh database of the same PostgreSQL server.

Run as `python -m bench.peers.dbos_peer --dsn POSTGRES_URL --profile quick|full`; the figures are
one JSON object on the last line of stdout, everything else goes to stderr.

How DBOS is configured, and why that is fair: DBOS is a library, so the workflows run in this
process. They are coroutines (`async def` workflows and steps) started with
`DBOS.start_workflow_async` on one asyncio event loop, the mode DBOS provides for many concurrent
I/O-bound workflows: a workflow waiting on a durable sleep holds no thread, and its result comes
from the in-process task rather than from polling the database. DBOS still runs each checkpoint
on a thread of its executor, which is unbounded by default: with a thousand workflows at once,
a thousand threads then fight over the 20 connections of the default pool, some time out (DBOS
logs "connection pool exhausted" and retries) and throughput halves. So the one setting changed
is `max_executor_threads`, bounded to the pool size, since a thread beyond it could only wait
for a connection. The rest is DBOS's default (LISTEN/NOTIFY on), logging is turned down to
WARNING, and the system database lives on the very server Perdure used, so both pay the same
commit cost.

Timer lateness is measured from the time a step records just before the durable sleep, so it
also includes that step's checkpoint and the sleep's own (DBOS fixes the wake time only after
them), which under a burst of starts is most of it. `timers.from_wake_time` is therefore also
given: lateness from the wake time DBOS recorded, the counterpart of Perdure's due time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import psycopg
from dbos import DBOS, DBOSConfig
from psycopg import sql
from sqlalchemy import make_url

from bench.stats import rates, summary_ms

STEPS = 10
WARMUP = 2
POOL = 20  # DBOS's default system database pool
CONFIG = (
    "async workflows and steps started with DBOS.start_workflow_async on one asyncio event loop"
    f" in one process, default pool of {POOL} connections with max_executor_threads={POOL},"
    " logging at WARNING"
)


@dataclass(frozen=True)
class Profile:
    """How much of each shape to run."""

    runs: int
    workflows: int
    timers: int
    sleep_s: float


PROFILES = {
    "quick": Profile(runs=3, workflows=20, timers=5, sleep_s=0.2),
    "full": Profile(runs=50, workflows=1000, timers=200, sleep_s=1.0),
}


@DBOS.step()
async def noop() -> int:
    """Does nothing: what remains is DBOS's own cost per step."""
    return 1


@DBOS.step()
async def now() -> float:
    """The wall clock, checkpointed."""
    return time.time()


@DBOS.workflow()
async def noop_steps(count: int) -> int:
    """`count` no-op steps, one after the other."""
    for _ in range(count):
        await noop()
    return count


@DBOS.workflow()
async def sleeper(seconds: float) -> tuple[float, float]:
    """When the code was about to sleep, and when it resumed after a durable sleep."""
    before = await now()
    await DBOS.sleep_async(seconds)
    return before, await now()


async def latency(runs: int) -> dict[str, Any]:
    """One workflow at a time, start to result, after a few warm-up runs."""
    durations = []
    for index in range(WARMUP + runs):
        started = time.perf_counter()
        handle = await DBOS.start_workflow_async(noop_steps, STEPS)
        await handle.get_result()
        if index >= WARMUP:
            durations.append(time.perf_counter() - started)
    return {"runs": runs, "ten_steps": summary_ms(durations)}


async def throughput(workflows: int) -> dict[str, Any]:
    """`workflows` workflows started at once: first start to last result."""
    started = time.perf_counter()
    handles = await asyncio.gather(
        *(DBOS.start_workflow_async(noop_steps, STEPS) for _ in range(workflows))
    )
    await asyncio.gather(*(handle.get_result() for handle in handles))
    seconds = time.perf_counter() - started
    return rates(workflows, STEPS, seconds)


async def timers(workflows: int, seconds: float) -> dict[str, Any]:
    """Workflows that each sleep `seconds` at once: how late each resumed."""
    handles = await asyncio.gather(
        *(DBOS.start_workflow_async(sleeper, seconds) for _ in range(workflows))
    )
    results = await asyncio.gather(*(handle.get_result() for handle in handles))
    lateness = [resumed - before - seconds for before, resumed in results]
    wakes = await asyncio.gather(*(_wake_time(handle.get_workflow_id()) for handle in handles))
    return {
        "workflows": workflows,
        "sleep_s": seconds,
        **summary_ms(lateness),
        "early": sum(1 for value in lateness if value < 0),
        "min_ms": round(min(lateness) * 1000, 3),
        "from_wake_time": summary_ms(
            [resumed - wake for (_, resumed), wake in zip(results, wakes, strict=True)]
        ),
    }


async def _wake_time(workflow_id: str) -> float:
    """The wake time DBOS checkpointed for the workflow's durable sleep (its output)."""
    steps = await DBOS.list_workflow_steps_async(workflow_id)
    [wake] = [step["output"] for step in steps if step["function_name"] == "DBOS.sleep"]
    assert isinstance(wake, float), "a durable sleep checkpoints its wake time"
    return wake


async def measure(profile: Profile) -> dict[str, Any]:
    """Every shape, in order, on the launched DBOS."""
    print("dbos: latency", file=sys.stderr, flush=True)
    results = {"latency": await latency(profile.runs)}
    print("dbos: throughput", file=sys.stderr, flush=True)
    results["throughput"] = await throughput(profile.workflows)
    print("dbos: timers", file=sys.stderr, flush=True)
    results["timers"] = await timers(profile.timers, profile.sleep_s)
    return results


def _admin(dsn: str, statement: sql.Composed) -> None:
    # CREATE/DROP DATABASE cannot run inside a transaction.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


def run(dsn: str, profile: Profile) -> dict[str, Any]:
    """DBOS on a database of its own on the server of `dsn`, dropped afterwards."""
    database = f"dbos_bench_{secrets.token_hex(4)}"
    _admin(dsn, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        # SQLAlchemy keeps `?host=/path` (a unix socket) as a query argument for psycopg.
        url = make_url(dsn).set(database=database).render_as_string(hide_password=False)
        config: DBOSConfig = {
            "name": "dbos-bench",
            "system_database_url": url,
            "log_level": "WARNING",
            "sys_db_pool_size": POOL,
            "max_executor_threads": POOL,
        }
        DBOS(config=config)
        try:
            DBOS.launch()
            figures = asyncio.run(measure(profile))
        finally:
            DBOS.destroy()
    finally:
        _admin(
            dsn, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
    return {"peer": "dbos", "version": version("dbos"), "config": CONFIG, **figures}


def main() -> None:
    """Parse the arguments, measure, print the figures as the last line of stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True, help="a PostgreSQL server (any database on it)")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    args = parser.parse_args()
    # Only the figures may reach stdout: the caller reads its last line.
    with contextlib.redirect_stdout(sys.stderr):
        result = run(args.dsn, PROFILES[args.profile])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
