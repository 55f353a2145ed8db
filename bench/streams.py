"""The push path's shapes, through perdure.client as an application uses it: how soon the
client has a run's result (`result()`: GetWorkflowResult, a long poll woken by the commit), how
soon a reader following a stream (`stream()`: ReadStream) has a frame a step emitted, and how
many frames per second one step streams to one reader."""

from __future__ import annotations

import time
from typing import Any

from bench import result_floor
from bench.shapes import TIMEOUT, Progress
from bench.stats import summary_ms
from perdure.client import Client, Frame

RESULT_TARGET_MS = 2.0
FIRST_FRAME_TARGET_MS = 5.0
FRAMES_PER_S_TARGET = 5000.0
FRAME_GAP = 0.02  # between the paced frames: each is sent alone, measured alone
# Frames emitted one at a time before the timed ones, not timed: history's pooled connections
# each plan (and compile) the emit's statements on their first few uses; a service that has
# been running a while has done so long ago.
WARM_UP_FRAMES = 100
WARM_UP_GAP = 0.002
# Runs before the timed ones, not timed, for the same reason (`--only streams` starts cold).
WARM_UP_RUNS = 20


def streams(client: Client, runs: int, samples: int, frames: int) -> dict[str, Any]:
    """The three figures, one run at a time."""
    result = result_latency(client, runs)
    # The same hops with nothing on them, idle as long as the runs took (result_floor.py).
    progress = Progress("result path, bare hops")
    result["bare_hops"] = result_floor.measure(runs, result["duration_ms"]["median_ms"] / 1000)
    progress.done(f"+{result['bare_hops']['median_ms']:.2f} ms, median")
    return {
        "result": result,
        "first_frame": first_frame(client, samples),
        "sustained": sustained(client, frames),
    }


def result_latency(client: Client, runs: int) -> dict[str, Any]:
    """The 10-step workflow, one at a time: the client's start → result returned, minus the
    run's own duration by the database clock (create → close): what getting the result adds."""
    progress = Progress("result latency")
    added, seen, durations, after_close, before_create = [], [], [], [], []
    for index in range(WARM_UP_RUNS):
        client.start_workflow("noop_steps", 10, workflow_id=f"res-warm-{index}")
        client.result(f"res-warm-{index}", timeout=TIMEOUT)
    for index in range(runs):
        workflow_id = f"res-{index}"
        began, called = time.perf_counter(), time.time()
        client.start_workflow("noop_steps", 10, workflow_id=workflow_id)
        client.result(workflow_id, timeout=TIMEOUT)
        waited, returned = time.perf_counter() - began, time.time()
        run = client.describe(workflow_id).workflow
        duration = (run.close_time.ToNanoseconds() - run.create_time.ToNanoseconds()) / 1e9
        seen.append(waited)
        durations.append(duration)
        added.append(max(0.0, waited - duration))
        # The database's clock is this machine's: the close's timestamp → the result in hand.
        after_close.append(returned - run.close_time.ToNanoseconds() / 1e9)
        # The start call → the transaction that created the run (its create time).
        before_create.append(run.create_time.ToNanoseconds() / 1e9 - called)
        progress.update(index + 1, runs)
    result = {"runs": runs, "client_ms": summary_ms(seen), **summary_ms(added)}
    result["close_to_client_ms"] = summary_ms(after_close)
    result["start_to_create_ms"] = summary_ms(before_create)
    result["duration_ms"] = summary_ms(durations)
    result["target_ms"] = RESULT_TARGET_MS
    progress.done(f"+{result['median_ms']:.2f} ms over the run's duration, median")
    return result


def first_frame(client: Client, samples: int) -> dict[str, Any]:
    """A step emits `samples` chunks FRAME_GAP apart while a reader follows the stream: each
    chunk's emit time (inside it, the worker's clock: the same machine's) → the reader has it.
    After WARM_UP_FRAMES untimed, as a service running for a while has them."""
    progress = Progress("stream frame latency")
    warm_up = {"count": WARM_UP_FRAMES, "gap": WARM_UP_GAP}
    client.start_workflow("emit_paced", warm_up, workflow_id="ff-0")
    _follow(client, "ff-0", WARM_UP_FRAMES)
    client.start_workflow("emit_paced", {"count": samples, "gap": FRAME_GAP}, workflow_id="ff-1")
    received = _follow(client, "ff-1", samples)
    delays = [at - frame.data[1] for at, frame in received]
    result: dict[str, Any] = {
        "samples": samples,
        **summary_ms(delays),
        "target_ms": FIRST_FRAME_TARGET_MS,
    }
    # The emit → the start of the transaction that stored the frame (its time), and that →
    # the reader: the worker's half and history's and the gateway's.
    result["emit_to_store_ms"] = summary_ms(
        [frame.time.timestamp() - frame.data[1] for _, frame in received]
    )
    result["store_to_reader_ms"] = summary_ms(
        [at - frame.time.timestamp() for at, frame in received]
    )
    progress.done(f"{result['median_ms']:.2f} ms emit → reader, median of {samples}")
    return result


def sustained(client: Client, frames: int) -> dict[str, Any]:
    """A step emits `frames` chunks in a row while one reader follows: frames per second from
    the first emit to the last frame read."""
    progress = Progress("stream frames per second")
    client.start_workflow("emit_burst", frames, workflow_id="burst-1")
    received = _follow(client, "burst-1", frames)
    seconds = received[-1][0] - received[0][1].data[1]
    result = {
        "frames": frames,
        "seconds": round(seconds, 3),
        "frames_per_s": round(frames / seconds, 1),
        "target_per_s": FRAMES_PER_S_TARGET,
    }
    progress.done(f"{result['frames_per_s']:.0f} frames/s, one step to one reader")
    return result


def _follow(client: Client, workflow_id: str, expected: int) -> list[tuple[float, Frame]]:
    """The run's frames with when each arrived (time.time()), read until the run closed;
    checked whole: frames 1..expected carrying chunks 0..expected-1, no reset."""
    received = [(time.time(), frame) for frame in client.stream(workflow_id)]
    seqs = [frame.seq for _, frame in received]
    chunks = [None if frame.reset else frame.data[0] for _, frame in received]
    if seqs != list(range(1, expected + 1)) or chunks != list(range(expected)):
        resets = [(frame.seq, frame.attempt) for _, frame in received if frame.reset]
        wrong = next(i for i, chunk in enumerate([*chunks, None]) if chunk != i)
        found = received[wrong][1] if wrong < len(received) else None
        raise RuntimeError(
            f"{workflow_id}: {len(received)} frames of {expected}, resets (seq, attempt) "
            f"{resets}; frame {wrong + 1} is {found}"
        )
    return received
