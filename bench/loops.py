"""The long loops: single runs that live long, each on a worker of its own.

- chat: one run of many turns (signal → model step → reply published → wait); the wall time of
  a turn (signal received → reply published, database clock), the worker's CPU per turn and
  the journal bytes per turn, over turns 6-35 against the last 30 turns: a turn should cost the
  same late as early;
- loop: one run of many steps in a row; its time and the worker's resident memory part way
  and at the end, which should stay bounded;
- big journal: one run whose steps return large outputs; its worker is killed (SIGKILL)
  halfway and another takes over: does the run complete, and how long does its replay take.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

import psycopg

from bench import cpu
from bench.cluster import Cluster
from bench.shapes import Progress
from perdure.client import Client
from perdure.common.payload import MAX_PAYLOAD_BYTES

TURN_TARGET = 1.3  # a late turn costs at most this many times an early one
# Turns averaged together: 30 (fewer in a short chat), since the worker's CPU time is read in
# 10 ms ticks and a turn costs about that much.
WINDOW = 30
FIRST = 6  # the early window starts past the first turns' warm-up
MIB = 1024 * 1024
BLOB_BYTES = MAX_PAYLOAD_BYTES - 16  # a "2 MiB" output: the largest a payload may be
WAIT_TIMEOUT = 300.0
CONCURRENCY = 10
OPEN = ("RUNNING", "WAITING")

Query = Callable[[str, list[Any]], list[tuple[Any, ...]]]


def _own_worker(cluster: Cluster) -> int:
    """A fresh worker, alone: its CPU time and memory are this shape's."""
    cluster.stop_workers()
    [worker] = cluster.start_workers(1, CONCURRENCY)
    return worker.pid


@contextmanager
def _connected(cluster: Cluster) -> Iterator[Query]:
    """Queries on one connection: polled every few milliseconds, they must be cheap."""
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        yield lambda sql, params: conn.execute(sql, params).fetchall()


def _poll(condition: Callable[[], bool], what: str, interval: float, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)


# -- chat ------------------------------------------------------------------------------------


def chat(cluster: Cluster, client: Client, turns: int) -> dict[str, Any]:
    """One run of `turns` turns, one message at a time: each sent once the run waits again."""
    if turns < 30:
        raise ValueError(f"the chat shape needs at least 30 turns, not {turns}")
    pid, workflow_id = _own_worker(cluster), "chat-1"
    with _connected(cluster) as query:
        return _chat(query, client, pid, workflow_id, turns)


def _chat(query: Query, client: Client, pid: int, workflow_id: str, turns: int) -> dict[str, Any]:
    progress = Progress(f"chat, {turns} turns")
    client.start_workflow("chat_turns", turns, workflow_id=workflow_id)
    _wait_turn(query, workflow_id, 0, 0)
    cpu_after = [cpu.process_seconds(pid)]  # after turn n, at [n]
    for turn in range(1, turns + 1):
        [(sent_count,)] = query(
            "SELECT event_count FROM history.workflows WHERE workflow_id = %s", [workflow_id]
        )
        client.signal(workflow_id, "message", f"message {turn}")
        _wait_turn(query, workflow_id, turn, sent_count + 1)
        cpu_after.append(cpu.process_seconds(pid))
        progress.update(turn, turns)
    events = query(
        "SELECT event_id, event_type, name, created_at, pg_column_size(e.*) FROM history.events e"
        " WHERE workflow_id = %s ORDER BY event_id",
        [workflow_id],
    )
    result = _chat_figures(events, cpu_after, turns)
    result["payload_store_bytes"] = _payload_store_bytes(query)
    progress.done(
        f"early {result['early']['wall_ms']:.1f} ms / CPU {result['early']['cpu_ms']:.1f} ms, "
        f"late {result['late']['wall_ms']:.1f} ms / CPU {result['late']['cpu_ms']:.1f} ms"
    )
    return result


def _wait_turn(query: Query, workflow_id: str, turn: int, after_events: int) -> None:
    """Wait until the run published its reply of `turn` and waits again (or completed)."""

    def done() -> bool:
        [(status, count)] = query(
            "SELECT status, event_count FROM history.workflows WHERE workflow_id = %s",
            [workflow_id],
        )
        if status not in ("WAITING", "COMPLETED"):
            if status not in OPEN:
                raise RuntimeError(f"the chat run ended {status} at turn {turn}")
            return False
        if count <= after_events:  # the signal's own event: the turn has not begun
            return False
        [(replies,)] = query(  # the cheap test passed: make sure with the costlier one
            "SELECT count(*) FROM history.events WHERE workflow_id = %s"
            " AND event_type = 'STATE_UPDATED' AND name = 'reply'",
            [workflow_id],
        )
        return bool(replies >= turn)

    _poll(done, f"turn {turn} of the chat", 0.005, WAIT_TIMEOUT)


def _chat_figures(
    events: list[tuple[Any, ...]], cpu_after: list[float], turns: int
) -> dict[str, Any]:
    """Per-turn wall time, worker CPU and journal bytes, averaged over turns 6-35 and over the
    last 30 turns (fewer of each in a short chat; the very last turn left out: it also
    completes the run)."""
    signals = [row for row in events if row[1] == "SIGNAL_RECEIVED"]
    replies = [row for row in events if row[1] == "STATE_UPDATED" and row[2] == "reply"]
    if len(signals) != turns or len(replies) != turns:
        raise RuntimeError(f"{len(signals)} messages and {len(replies)} replies, not {turns}")

    def wall(turn: int) -> float:
        received: datetime = signals[turn - 1][3]
        replied: datetime = replies[turn - 1][3]
        return (replied - received).total_seconds()

    def journal_bytes(turn: int) -> int:
        first, after = signals[turn - 1][0], signals[turn][0]
        return sum(row[4] for row in events if first <= row[0] < after)

    def window(turns_in: range) -> dict[str, Any]:
        return {
            "turns": [turns_in.start, turns_in.stop - 1],
            "wall_ms": round(statistics.mean(wall(t) for t in turns_in) * 1000, 3),
            "cpu_ms": round(
                statistics.mean(cpu_after[t] - cpu_after[t - 1] for t in turns_in) * 1000, 3
            ),
            "journal_bytes": round(statistics.mean(journal_bytes(t) for t in turns_in), 1),
        }

    size = min(WINDOW, turns // 5)
    early, late = window(range(FIRST, FIRST + size)), window(range(turns - size, turns))
    ratios = {
        key: round(late[key] / early[key], 2) if early[key] else 0.0
        for key in ("wall_ms", "cpu_ms", "journal_bytes")
    }
    return {
        "turns": turns,
        "early": early,
        "late": late,
        "late_vs_early": ratios,
        "target": TURN_TARGET,
        "met": ratios["wall_ms"] <= TURN_TARGET and ratios["cpu_ms"] <= TURN_TARGET,
        "journal_events": len(events),
    }


def _payload_bytes(query: Query, workflow_id: str) -> int:
    """The bytes of a run's payloads: inline in its events, and those its events name in the
    payload store (history.payloads, keyed by sha256, where there is one)."""
    [(inline,)] = query(
        "SELECT coalesce(sum(octet_length(payload)), 0) FROM history.events WHERE workflow_id = %s",
        [workflow_id],
    )
    [(by_content,)] = query(
        "SELECT to_regclass('history.payloads') IS NOT NULL AND EXISTS (SELECT FROM"
        " information_schema.columns WHERE table_schema = 'history' AND table_name = 'events'"
        " AND column_name = 'payload_sha256')",
        [],
    )
    if not by_content:
        return int(inline)
    [(stored,)] = query(
        "SELECT coalesce(sum(octet_length(data)), 0) FROM history.payloads WHERE sha256 IN"
        " (SELECT payload_sha256 FROM history.events WHERE workflow_id = %s)",
        [workflow_id],
    )
    return int(inline) + int(stored)


def _payload_store_bytes(query: Query) -> int | None:
    """The bytes of the journal's payload store, where there is one (history.payloads)."""
    [(exists,)] = query("SELECT to_regclass('history.payloads') IS NOT NULL", [])
    if not exists:
        return None
    [(size,)] = query("SELECT coalesce(sum(pg_column_size(p.*)), 0) FROM history.payloads p", [])
    return int(size)


# -- loop ------------------------------------------------------------------------------------


def loop(cluster: Cluster, client: Client, steps: int) -> dict[str, Any]:
    """One run of `steps` steps in a row; the worker's resident memory at 10 % and at the end,
    and its peak."""
    pid, workflow_id = _own_worker(cluster), "loop-1"
    with _connected(cluster) as query:
        return _loop(query, client, pid, workflow_id, steps)


def _loop(query: Query, client: Client, pid: int, workflow_id: str, steps: int) -> dict[str, Any]:
    progress = Progress(f"loop, {steps} steps")
    rss_before, _ = cpu.resident_bytes(pid)
    client.start_workflow("autonomous_loop", steps, workflow_id=workflow_id)
    rss: dict[str, float] = {"start_mib": round(rss_before / MIB, 1)}

    def closed() -> bool:
        [(status, done)] = query(
            "SELECT status, (SELECT count(*) FROM history.events WHERE workflow_id = w.workflow_id"
            " AND event_type = 'STEP_COMPLETED') FROM history.workflows w WHERE workflow_id = %s",
            [workflow_id],
        )
        if done >= steps // 10 and "tenth_mib" not in rss:
            rss["tenth_mib"] = round(cpu.resident_bytes(pid)[0] / MIB, 1)
        progress.update(done, steps)
        return status not in OPEN

    _poll(closed, "the loop to end", 0.1, WAIT_TIMEOUT * 4)
    now, peak = cpu.resident_bytes(pid)
    rss.update(end_mib=round(now / MIB, 1), peak_mib=round(peak / MIB, 1))
    [(status, seconds)] = query(
        "SELECT status, extract(epoch FROM closed_at - created_at)::float8"
        " FROM history.workflows WHERE workflow_id = %s",
        [workflow_id],
    )
    result = {
        "steps": steps,
        "completed": status == "COMPLETED",
        "status": status,
        "seconds": round(seconds, 3),
        "steps_per_s": round(steps / seconds, 1),
        "rss": rss,
    }
    progress.done(
        f"{status.lower()} in {seconds:.1f} s ({result['steps_per_s']:.0f} steps/s), worker RSS "
        f"{rss.get('tenth_mib', 0):.0f} MiB at 10 %, {rss['end_mib']:.0f} MiB at the end"
    )
    return result


# -- big journal -----------------------------------------------------------------------------


def big_journal(cluster: Cluster, client: Client, outputs: int) -> dict[str, Any]:
    """One run of `outputs` steps returning 2 MiB each; SIGKILL its worker after half of them,
    start another: does the run complete, and how long after the kill does it go on."""
    _own_worker(cluster)
    with _connected(cluster) as query:
        return _big_journal(query, cluster, client, "big-1", outputs)


def _big_journal(
    query: Query, cluster: Cluster, client: Client, workflow_id: str, outputs: int
) -> dict[str, Any]:
    progress = Progress(f"big journal, {outputs} x 2 MiB")
    client.start_workflow(
        "big_outputs", {"count": outputs, "size": BLOB_BYTES}, workflow_id=workflow_id
    )

    def recorded() -> int:
        [(count,)] = query(
            "SELECT count(*) FROM history.events WHERE workflow_id = %s"
            " AND event_type = 'STEP_COMPLETED'",
            [workflow_id],
        )
        progress.update(count, outputs)
        return int(count)

    _poll(lambda: recorded() >= outputs // 2, "half of the outputs", 0.02, WAIT_TIMEOUT)
    cluster.workers[0].send_signal(signal.SIGKILL)
    killed = time.time()
    cluster.workers[0].wait()
    [(fence,)] = query("SELECT fence FROM history.workflows WHERE workflow_id = %s", [workflow_id])
    cluster.workers.clear()
    cluster.start_workers(1, CONCURRENCY)
    loaded: list[float] = []  # when a new lease first loaded the run (its fence went up)

    def ended() -> bool:
        [(status, now_fence)] = query(
            "SELECT status, fence FROM history.workflows WHERE workflow_id = %s", [workflow_id]
        )
        if now_fence > fence and not loaded:
            loaded.append(time.time())
        recorded()
        return status not in OPEN

    with suppress(TimeoutError):  # reported as not completed, with the status it is stuck in
        _poll(ended, "the run to end after the kill", 0.02, WAIT_TIMEOUT)
    return _big_figures(query, workflow_id, outputs, fence, killed, loaded, progress)


def _big_figures(
    query: Query,
    workflow_id: str,
    outputs: int,
    fence: int,
    killed: float,
    loaded: list[float],
    progress: Progress,
) -> dict[str, Any]:
    [(status, failure, seconds)] = query(
        "SELECT status, failure,"
        " extract(epoch FROM coalesce(closed_at, now()) - created_at)::float8"
        " FROM history.workflows WHERE workflow_id = %s",
        [workflow_id],
    )
    journal = _payload_bytes(query, workflow_id)
    [(first_new,)] = query(
        "SELECT min(created_at) FROM history.events WHERE workflow_id = %s AND fence > %s",
        [workflow_id, fence],
    )
    resumed = first_new.timestamp() - killed if first_new is not None else None
    replay = first_new.timestamp() - loaded[0] if first_new is not None and loaded else None
    result: dict[str, Any] = {
        "outputs": outputs,
        "output_bytes": BLOB_BYTES,
        "journal_mib": round(int(journal) / MIB, 1),
        "completed": status == "COMPLETED",
        "status": status,
        "seconds": round(seconds, 3),
        "resumed_after_kill_s": None if resumed is None else round(resumed, 3),
        "replay_s": None if replay is None else round(max(replay, 0.0), 3),
    }
    if failure:
        result["failure"] = {"type": failure.get("type", ""), "message": failure.get("message", "")}
    if result["completed"]:
        progress.done(
            f"completed in {seconds:.1f} s; went on {resumed:.2f} s after the kill "
            f"(replay {result['replay_s']} s)"
        )
    else:
        why = result.get("failure", {}).get("message", "")
        progress.done(f"NOT completed: {status} {why}")
    return result
