"""Perdure's benchmark: `make bench` or `python -m bench [--quick] [--out DIR] [--only streams]`.

In one invocation, on one embedded PostgreSQL: the ceiling (raw commits, a gRPC round trip),
the architecture's floor (a bare journal service on the same database), then Perdure's latency,
an API call over gRPC and HTTP, the push path (result latency, stream frames), throughput,
timers (also many due at once), signals, recovery and scale, the long loops (a chat of many
turns, a loop of many steps, a run with a large journal whose worker is killed), flow control
(fairness beside a large tenant, a key's rate, a budget under a fan-out), then the
peers (DBOS and Temporal, when installed: `pip install --group bench`) on the same shapes.
Then throughput on one cell and on two (fresh clusters, the second cell a database of its own
on the same server). Prints a table with targets and ratios and writes results.json and
chart.png (default: bench-results/). `--only streams` runs the push path's shapes alone,
`--only flow` flow control's, `--only cells` the cells' (no chart).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ceiling, floor, flow, loops, report, shapes, streams
from bench.cluster import Cluster
from bench.peer_runs import PEERS, run_peer
from perdure.client import Client


@dataclass(frozen=True)
class Profile:
    """How big each shape is."""

    commits: int
    grpc_calls: int
    latency_runs: int
    workflows: int
    concurrency: int
    timers: int
    timer_seconds: float
    timers_at_once: int  # due at one moment
    signals: int
    recovery: int
    scale_workers: tuple[int, ...]
    chat_turns: int
    loop_steps: int
    big_outputs: int  # of 2 MiB each
    first_frames: int  # frames timed one by one, emit → reader
    stream_frames: int  # streamed in a row by one step to one reader
    big_tenant: int  # runs queued by the large tenant (fairness)
    small_tenant: int  # runs of the small one, beside them and on an idle cluster
    rated_steps: int  # steps of a key limited to 50 a second
    cells_workflows: int  # 10-step workflows on one cell, then on two


FULL = Profile(
    1000, 2000, 50, 1000, 50, 200, 1.0, 10_000, 50, 50, (1, 2, 4), 1000, 10_000, 100, 50, 20_000,
    2000, 20, 300, 1000,
)  # fmt: skip
# Checks the suite runs, not speed.
QUICK = Profile(
    50, 100, 3, 20, 10, 5, 0.2, 20, 3, 3, (1, 2), 50, 200, 5, 5, 200, 100, 5, 60, 20
)  # fmt: skip
# What `--only` may pick: the shapes that can run alone.
ALONE = ("streams", "flow", "cells")
CELL_COUNTS = (1, 2)


def run_streams(profile: Profile, client: Client) -> dict[str, Any]:
    """The push path's shapes (bench/streams.py)."""
    print("streams", flush=True)
    return streams.streams(
        client, profile.latency_runs, profile.first_frames, profile.stream_frames
    )


def run_flow(profile: Profile, cluster: Cluster, client: Client) -> dict[str, Any]:
    """Flow control's shapes (bench/flow.py), on two workers; they stop and kill workers."""
    print("flow control", flush=True)
    return flow.flow(cluster, client, profile.big_tenant, profile.small_tenant, profile.rated_steps)


def run_cells(profile: Profile, scratch: Path) -> dict[str, Any]:
    """Throughput on one cell and on two, each on a fresh cluster (bench/shapes.py:cells)."""
    return shapes.cells(scratch, CELL_COUNTS, profile.cells_workflows, profile.concurrency)


def run_alone(profile: Profile, scratch: Path, only: str) -> dict[str, Any]:
    """One group of shapes on a fresh cluster (`--only`)."""
    results: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if only == "cells":  # clusters of its own
        results[only] = run_cells(profile, scratch)
        return results
    cluster = Cluster(scratch)
    print("starting PostgreSQL and the services ...", flush=True)
    cluster.start()
    try:
        with Client(cluster.gateway, timeout=60, api_key=cluster.client_key) as client:
            cluster.start_workers(2, profile.concurrency)
            if only == "flow":
                results[only] = run_flow(profile, cluster, client)
            else:
                results[only] = run_streams(profile, client)
    finally:
        cluster.close()
    return results


def run(profile: Profile, scratch: Path, *, peers: bool) -> dict[str, Any]:
    """Every shape, in order, on one fresh cluster; then the peers on the same database
    server."""
    results: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    cluster = Cluster(scratch)
    print("starting PostgreSQL and the services ...", flush=True)
    cluster.start()
    try:
        print("ceiling", flush=True)
        results["ceiling"] = {
            "commit_1": ceiling.commits(cluster.dsn, 1, profile.commits),
            "commit_16": ceiling.commits(cluster.dsn, 16, max(1, profile.commits // 16)),
            "grpc": ceiling.grpc_round_trips(profile.grpc_calls),
        }
        print("floor", flush=True)
        # As many workflows in flight as the two workers of the throughput run hold.
        results["floor"] = floor.measure(
            cluster.dsn, profile.latency_runs, profile.workflows, 2 * profile.concurrency
        )
        commit_ms = results["ceiling"]["commit_1"]["median_ms"]
        print("perdure", flush=True)
        with Client(cluster.gateway, timeout=60, api_key=cluster.client_key) as client:
            cluster.start_workers(2, profile.concurrency)
            results["latency"] = shapes.latency(cluster, client, profile.latency_runs, commit_ms)
            results["api"] = shapes.api_calls(cluster, client, profile.grpc_calls // 4)
            results["remote"] = shapes.remote_latency(
                client, profile.latency_runs, results["latency"]["per_step_ms"]
            )
            results["streams"] = run_streams(profile, client)
            results["throughput"] = {}
            results["throughput"]["2wx10"] = shapes.throughput(
                cluster, client, profile.workflows, 10, "2wx10"
            )
            results["timers"] = shapes.timers(
                cluster, client, profile.timers, profile.timer_seconds
            )
            # Due once every run could have set its timer at the rate starts went above.
            starts_per_s = results["throughput"]["2wx10"]["starts_per_s"]
            results["timers_at_once"] = shapes.timers_at_once(
                cluster,
                client,
                profile.timers_at_once,
                3.0 + 2 * profile.timers_at_once / starts_per_s,
            )
            results["signals"] = shapes.signals(cluster, client, profile.signals)
            results["recovery"] = shapes.recovery(cluster, client, profile.recovery, scratch)
            for workers in profile.scale_workers:
                cluster.stop_workers()
                cluster.start_workers(workers, profile.concurrency)
                key = f"{workers}wx10"
                if key not in results["throughput"]:
                    results["throughput"][key] = shapes.throughput(
                        cluster, client, profile.workflows, 10, key
                    )
            cluster.stop_workers()
            cluster.start_workers(2, profile.concurrency)
            # The same number of steps, ten times longer workflows: per-step cost should hold.
            results["throughput"]["2wx100"] = shapes.throughput(
                cluster, client, max(1, profile.workflows // 10), 100, "2wx100"
            )
            results["chat"] = loops.chat(cluster, client, profile.chat_turns)
            results["loop"] = loops.loop(cluster, client, profile.loop_steps)
            results["big_journal"] = loops.big_journal(cluster, client, profile.big_outputs)
            cluster.stop_workers()
            cluster.start_workers(2, profile.concurrency)
            results["flow"] = run_flow(profile, cluster, client)
        if peers:
            cluster.stop_workers()  # idle, but the peers get the machine to themselves
            print("peers", flush=True)
            results["peers"] = {}
            for name in PEERS:
                measured = run_peer(name, "quick" if profile is QUICK else "full", cluster.dsn)
                if measured is not None:
                    results["peers"][name] = measured
    finally:
        cluster.close()
    results["cells"] = run_cells(profile, scratch)  # with the machine to itself again
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the suite and report."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="output folder")
    parser.add_argument("--no-peers", action="store_true", help="measure Perdure only")
    parser.add_argument("--only", choices=ALONE, help="run only these shapes (no peers)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    profile = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="pb") as scratch:  # short: a socket lives in it
        if args.only:
            results = run_alone(profile, Path(scratch), args.only)
        else:
            results = run(profile, Path(scratch), peers=not args.no_peers)
    results["seconds"] = round(time.monotonic() - started, 1)
    results["ratios"] = report.ratios(results)
    report.print_table(results)
    written = report.write(results, args.out)
    print(f"\nwrote {' and '.join(str(path) for path in written)} in {results['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
