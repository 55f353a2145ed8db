"""The benchmark's outputs: a table on the terminal, results.json and chart.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Results = dict[str, Any]

# The hot path's targets, beside the figures (and the floor: a bare journal service, floor.py).
TEN_STEPS_MS = 15.0
START_COMPLETE_MS = 4.0
PER_STEP_MS = 1.2
PER_STEP_COMMITS = 6.0
STEPS_PER_S = {"2wx10": 1800.0, "2wx100": 3000.0}
STARTS_PER_S = 1000.0
CPU_PER_STEP_MS = 1.0
TIMER_P99_MS = 20.0
TIMERS_FIRED_PER_S = 2000.0
SIGNAL_MS = 5.0
REMOTE_VS_LOCAL = 3.0


def rows(results: Results) -> list[tuple[str, str, str]]:
    """(figure, value, comparison) lines of the table."""
    lines = _ceiling_rows(results) if "ceiling" in results else []
    lines += _perdure_rows(results)
    lines += _stream_rows(results) + _loop_rows(results) + _flow_rows(results)
    lines += _cells_rows(results)
    return lines + _peer_rows(results)


def _ceiling_rows(results: Results) -> list[tuple[str, str, str]]:
    """The database's and gRPC's own costs, what Perdure's figures compare with."""
    ceiling, lines = results["ceiling"], []
    commit_ms = ceiling["commit_1"]["median_ms"]
    lines.append(
        (
            "commit, 1 connection",
            f"{ceiling['commit_1']['commits_per_s']:.0f}/s, "
            f"{commit_ms:.3f} ms median, {ceiling['commit_1']['p99_ms']:.3f} ms p99",
            "ceiling",
        )
    )
    lines.append(
        (
            "commit, 16 connections",
            f"{ceiling['commit_16']['commits_per_s']:.0f}/s, "
            f"{ceiling['commit_16']['median_ms']:.3f} ms median",
            "ceiling",
        )
    )
    lines.append(
        (
            "grpc.aio unary round trip",
            f"{ceiling['grpc']['calls_per_s']:.0f}/s, {ceiling['grpc']['median_ms']:.3f} ms median",
            "ceiling",
        )
    )
    if "floor" in results:
        floor = results["floor"]
        lines.append(
            (
                "bare journal service: 10 steps / 0 steps",
                f"{floor['ten_steps']['median_ms']:.1f} / "
                f"{floor['start_complete']['median_ms']:.1f} ms median, "
                f"{floor['per_step_ms']:.2f} ms per step",
                "architecture floor",
            )
        )
        tp = floor["throughput"]
        lines.append(
            (
                f"bare journal service: {tp['workflows']} x 10, {tp['in_flight']} in flight",
                f"{tp['steps_per_s']:.0f} steps/s",
                "architecture floor",
            )
        )
    return lines


def _floor(results: Results, *path: str) -> str:
    """The floor's figure at `path` as "; floor X", or nothing when the floor did not run."""
    value: Any = results.get("floor")
    for key in path:
        value = None if value is None else value.get(key)
    return "" if value is None else f"; floor {value:,.2f}"


def _perdure_rows(results: Results) -> list[tuple[str, str, str]]:
    """Perdure's latency, API, throughput, timers, signals and recovery."""
    lines = []
    if "latency" in results:
        lat = results["latency"]
        ten, empty = lat["ten_steps"]["median_ms"], lat["start_complete"]["median_ms"]
        lines.append(
            (
                "10-step workflow, start → result",
                f"{ten:.1f} ms median, {lat['ten_steps']['p99_ms']:.1f} ms p99",
                _target(ten <= TEN_STEPS_MS, f"≤ {TEN_STEPS_MS:g} ms")
                + _floor(results, "ten_steps", "median_ms"),
            )
        )
        lines.append(
            (
                "start + complete (0 steps)",
                f"{empty:.1f} ms median",
                _target(empty <= START_COMPLETE_MS, f"≤ {START_COMPLETE_MS:g} ms")
                + _floor(results, "start_complete", "median_ms"),
            )
        )
        lines.append(
            (
                "per-step overhead",
                f"{lat['per_step_ms']:.2f} ms, {lat['per_step_vs_commit']}x commit",
                _target(
                    lat["per_step_ms"] <= PER_STEP_MS,
                    f"≤ {PER_STEP_MS:g} ms, ≤ {PER_STEP_COMMITS:g}x commit",
                )
                + _floor(results, "per_step_ms"),
            )
        )
    if "api" in results:
        api = results["api"]
        lines.append(
            (
                "describe a run: gRPC / HTTP+JSON",
                f"{api['grpc']['median_ms']:.2f} / {api['http']['median_ms']:.2f} ms median",
                f"HTTP ÷ gRPC = {api['http_vs_grpc']:.2f}",
            )
        )
    if "remote" in results:
        remote = results["remote"]
        lines.append(
            (
                "10 remote steps (ctx.call), start → result",
                f"{remote['ten_remote_steps']['median_ms']:.1f} ms median, "
                f"{remote['per_remote_step_ms']:.1f} ms per step",
                f"{remote['remote_vs_local_step']}x a local step; "
                + _target(
                    remote["remote_vs_local_step"] <= REMOTE_VS_LOCAL,
                    f"≤ {REMOTE_VS_LOCAL:g}x a local step",
                ),
            )
        )
        for name, peer in results.get("peers", {}).items():
            if "latency_local" in peer:  # its `latency` ran regular (task-queue) activities
                ratio = (
                    remote["ten_remote_steps"]["median_ms"]
                    / peer["latency"]["ten_steps"]["median_ms"]
                )
                lines.append(
                    (
                        f"{name}: 10 activities vs 10 remote steps",
                        f"{peer['latency']['ten_steps']['median_ms']:.1f} ms median",
                        f"Perdure ÷ {name} = {ratio:.2f} (lower is better)",
                    )
                )
        lines.append(
            (
                "10 remote steps side by side (ctx.gather)",
                f"{remote['ten_side_by_side']['median_ms']:.1f} ms median, "
                f"{remote['ten_side_by_side']['p99_ms']:.1f} ms p99",
                "",
            )
        )
    for key, run in results.get("throughput", {}).items():
        comparison = f"CPU {sum(run['cpu_ms_per_step'].values()):.2f} ms/step"
        target = STEPS_PER_S.get(key)
        if target is not None:
            met = run["steps_per_s"] >= target
            comparison += "; " + _target(met, f"≥ {target:,.0f} steps/s")
        if key == "2wx10":  # the floor's shape: 1,000 x 10 with both workers' slots in flight
            comparison += _floor(results, "throughput", "steps_per_s")
        lines.append(
            (
                f"throughput {key}",
                f"{run['steps_per_s']:.0f} steps/s, {run['workflows_per_s']:.0f} wf/s, "
                f"start p50 {run['schedule_to_start']['median_ms']:.1f} / p99 "
                f"{run['schedule_to_start']['p99_ms']:.1f} ms",
                comparison,
            )
        )
    if "2wx10" in results.get("throughput", {}):
        run = results["throughput"]["2wx10"]
        if "starts_per_s" in run:
            lines.append(
                (
                    "starts through the gateway while runs execute",
                    f"{run['starts_per_s']:.0f}/s ({run['workflows']} starts of the 2wx10 run)",
                    _target(run["starts_per_s"] >= STARTS_PER_S, f"≥ {STARTS_PER_S:,.0f}/s"),
                )
            )
        parts = sorted(run["cpu_ms_per_step"].items(), key=lambda item: -item[1])
        total = sum(run["cpu_ms_per_step"].values())
        lines.append(
            (
                "CPU per step, 2wx10",
                f"{total:.2f} ms: " + ", ".join(f"{part} {ms:.2f}" for part, ms in parts),
                _target(total <= CPU_PER_STEP_MS, f"≤ {CPU_PER_STEP_MS:g} ms")
                + f"; {run['stolen_share']:.0%} of CPU time stolen by the host",
            )
        )
    if "timers" in results:
        tm = results["timers"]
        lines.append(
            (
                f"timers ({tm['workflows']} x {tm['sleep_s']} s)",
                f"lateness {tm['median_ms']:.1f} median, "
                f"{tm['p99_ms']:.1f} p99, {tm['max_ms']:.1f} max ms",
                f"{tm['early']} early; "
                + _target(tm["p99_ms"] <= TIMER_P99_MS and not tm["early"], "p99 ≤ 20 ms"),
            )
        )
    if "timers_at_once" in results:
        tw = results["timers_at_once"]
        fired = tw["fired_per_s"] or 0.0
        lines.append(
            (
                f"{tw['workflows']} timers due at once",
                f"fired at {fired:,.0f}/s, lateness {tw['median_ms']:.0f} median, "
                f"{tw['p99_ms']:.0f} p99 ms ({tw['set_in_time']} set before the moment)",
                f"{tw['early']} early; "
                + _target(
                    fired >= TIMERS_FIRED_PER_S and not tw["early"],
                    f"≥ {TIMERS_FIRED_PER_S:,.0f}/s, none early",
                ),
            )
        )
    if "signals" in results:
        sg = results["signals"]
        lines.append(
            (
                "signal → next step",
                f"{sg['median_ms']:.1f} ms median, {sg['p99_ms']:.1f} ms p99",
                _target(sg["median_ms"] <= SIGNAL_MS, f"≤ {SIGNAL_MS:g} ms"),
            )
        )
    if "recovery" in results:
        rc = results["recovery"]
        lines.append(
            (
                f"recovery after SIGKILL ({rc['workflows']} workflows)",
                f"all going again after {rc['all_s']:.2f} s",
                "target ≤ 1 s",
            )
        )
    return lines


def _stream_rows(results: Results) -> list[tuple[str, str, str]]:
    """The push path: the result's latency over the run's duration, a frame's latency from
    its emit to a reader, frames per second from one step to one reader."""
    if "streams" not in results:
        return []
    found = results["streams"]
    res, first, rate = found["result"], found["first_frame"], found["sustained"]
    return [
        (
            "10-step workflow, result seen by the client",
            f"+{res['median_ms']:.2f} ms median over the run's duration "
            f"({res['p99_ms']:.2f} ms p99; start call → run created "
            f"{res['start_to_create_ms']['median_ms']:.2f} ms, close → client "
            f"{res['close_to_client_ms']['median_ms']:.2f} ms{_result_floor(results)})",
            _target(res["median_ms"] <= res["target_ms"], f"≤ {res['target_ms']:g} ms"),
        ),
        (
            "stream frame, emit → reader",
            f"{first['median_ms']:.2f} ms median, {first['p99_ms']:.2f} ms p99 "
            f"({first['samples']} frames; emit → stored "
            f"{first['emit_to_store_ms']['median_ms']:.2f} ms, stored → reader "
            f"{first['store_to_reader_ms']['median_ms']:.2f} ms)",
            _target(first["median_ms"] <= first["target_ms"], f"≤ {first['target_ms']:g} ms"),
        ),
        (
            f"stream frames, one step → one reader ({rate['frames']})",
            f"{rate['frames_per_s']:.0f} frames/s",
            _target(
                rate["frames_per_s"] >= rate["target_per_s"], f"≥ {rate['target_per_s']:,.0f}/s"
            ),
        ),
    ]


def _flow_rows(results: Results) -> list[tuple[str, str, str]]:
    """Flow control: the small tenant beside the large one, a key's rate, a budget's overshoot
    under a fan-out with a worker killed."""
    if "flow" not in results:
        return []
    fair, rate, budget = (results["flow"][part] for part in ("fairness", "rate", "budget"))
    low, high = (
        rate["target_per_s"] * (1 - rate["tolerance"]),
        rate["target_per_s"] * (1 + rate["tolerance"]),
    )
    return [
        (
            f"small tenant's schedule-to-start beside {fair['big_runs']} queued runs",
            f"{fair['busy']['p99_ms']:.1f} ms p99, {fair['ratio']:.2f}x idle's "
            f"{fair['idle']['p99_ms']:.1f} ms ({fair['small_runs']} runs; of it, arrival in the "
            f"scheduler → grant {fair['busy_in_scheduler']['p99_ms']:.1f} ms; "
            f"{fair['queued_after_small']} still queued after them; in first-in-first-out "
            f"order the first would have waited {fair['fifo_wait_s']:.1f} s)",
            _target(fair["ratio"] <= fair["target_ratio"], f"≤ {fair['target_ratio']:g}x idle"),
        ),
        (
            f"key limited to {rate['target_per_s']:g} requests/s ({rate['steps']} steps)",
            f"{rate['per_s']:.1f}/s",
            _target(
                low <= rate["per_s"] <= high, f"{rate['target_per_s']:g} ± {rate['tolerance']:.0%}"
            ),
        ),
        (
            "budget under a 100-way fan-out, a worker killed",
            f"overshoot {budget['overshoot_units']} units ({budget['spent_units']} of "
            f"{budget['limit_units']} spent, {budget['samples']} samples)",
            _target(budget["overshoot_units"] == 0, "exactly 0"),
        ),
    ]


def _cells_rows(results: Results) -> list[tuple[str, str, str]]:
    """Throughput by number of cells, on this one machine (the cells share its cores and its
    database server: a second cell adds a database's locks and commits, not cores)."""
    lines = []
    one = results.get("cells", {}).get("1")
    for count, run in results.get("cells", {}).items():
        versus = ""
        if one is not None and count != "1":
            versus = f"{run['steps_per_s'] / one['steps_per_s']:.2f}x one cell; "
        lines.append(
            (
                f"{count} cell{'s' if count != '1' else ''}: throughput {run['workflows']}x10",
                f"{run['steps_per_s']:.0f} steps/s, {run['starts_per_s']:.0f} starts/s, start p50 "
                f"{run['schedule_to_start']['median_ms']:.1f} ms (runs per cell: "
                f"{', '.join(map(str, run['runs_per_cell']))})",
                versus + f"CPU {sum(run['cpu_ms_per_step'].values()):.2f} ms/step, same cores",
            )
        )
    return lines


def _result_floor(results: Results) -> str:
    """What the result's path cannot go below: the start call goes client → gateway → history
    and the result history → gateway → client, four hops between three processes idle as long
    as the run (measured bare, result_floor.py), after the closing commit."""
    hops = results["streams"]["result"].get("bare_hops")
    if hops is None:
        return ""
    if "ceiling" not in results:
        return f"; floor: the same hops bare {hops['median_ms']:.2f} ms, before a commit"
    commit_ms = results["ceiling"]["commit_1"]["median_ms"]
    return (
        f"; floor: the same hops bare {hops['median_ms']:.2f} ms + a commit "
        f"{commit_ms:.2f} ms = {hops['median_ms'] + commit_ms:.2f} ms"
    )


def _target(met: bool, target: str) -> str:
    return f"target {target}: {'met' if met else 'MISSED'}"


def _turns(window: Results) -> str:
    """The turns a chat figure averages, as "6-35"."""
    first, last = window["turns"]
    return f"{first}-{last}"


def _loop_rows(results: Results) -> list[tuple[str, str, str]]:
    """The long loops: a late turn against an early one, memory over a long run, a large
    journal after a kill."""
    lines = []
    if "chat" in results:
        chat = results["chat"]
        early, late, ratio = chat["early"], chat["late"], chat["late_vs_early"]
        verdict = "met" if chat["met"] else "MISSED"
        lines.append(
            (
                f"chat turn, {_turns(early)} → {_turns(late)} of {chat['turns']} (signal → reply)",
                f"wall {early['wall_ms']:.1f} → {late['wall_ms']:.1f} ms, "
                f"worker CPU {early['cpu_ms']:.1f} → {late['cpu_ms']:.1f} ms",
                f"wall {ratio['wall_ms']}x, CPU {ratio['cpu_ms']}x "
                f"(target ≤ {chat['target']}x: {verdict})",
            )
        )
        lines.append(
            (
                f"chat journal bytes per turn, {_turns(early)} → {_turns(late)}",
                f"{early['journal_bytes']:.0f} → {late['journal_bytes']:.0f} B"
                + _store_note(chat.get("payload_store_bytes")),
                f"{ratio['journal_bytes']}x (target: flat)",
            )
        )
    if "loop" in results:
        loop, rss = results["loop"], results["loop"]["rss"]
        lines.append(
            (
                f"loop of {loop['steps']} steps in one run",
                f"{loop['status'].lower()} in {loop['seconds']:.1f} s, "
                f"{loop['steps_per_s']:.0f} steps/s",
                f"worker RSS {rss.get('tenth_mib', 0):.0f} MiB at 10 %, {rss['end_mib']:.0f} "
                f"at 100 %, peak {rss['peak_mib']:.0f}",
            )
        )
    if "big_journal" in results:
        big = results["big_journal"]
        planned = big["outputs"] * big["output_bytes"] / 2**20
        if big["completed"]:
            outcome = (
                f"completed in {big['seconds']:.1f} s, on again {big['resumed_after_kill_s']} s "
                f"after the kill (replay {big['replay_s']} s)"
            )
        else:
            why = big.get("failure", {}).get("type", "")
            outcome = f"NOT completed: {big['status']} ({why}) at {big['journal_mib']:.0f} MiB"
        lines.append(
            (
                f"journal of {planned:.0f} MiB ({big['outputs']} x 2 MiB), kill -9 halfway",
                outcome,
                "target: completes" + ("" if big["completed"] else " (MISSED)"),
            )
        )
    return lines


def _store_note(size: int | None) -> str:
    """The payload store's size, where the journal has one."""
    return "" if size is None else f" (payload store: {size} B in all)"


def _variants(peer: Results) -> list[tuple[str, str, str]]:
    """(label, latency key, throughput key) of each way a peer ran the steps."""
    found = [("", "latency", "throughput")]
    if "latency_local" in peer:
        found.append((" (local activities)", "latency_local", "throughput_local"))
    return found


def ratios(results: Results) -> dict[str, dict[str, float]]:
    """Perdure ÷ peer for each peer and shape: latency and timer p99 (below 1: Perdure is
    faster), throughput (above 1: Perdure is faster)."""
    if not results.get("peers"):
        return {}
    ours_latency = results["latency"]["ten_steps"]["median_ms"]
    ours_throughput = results["throughput"]["2wx10"]["steps_per_s"]
    ours_timers = results["timers"]["p99_ms"]  # measured from the journaled fire time
    found: dict[str, dict[str, float]] = {}
    for name, peer in results.get("peers", {}).items():
        for label, latency_key, throughput_key in _variants(peer):
            found[name + label] = {
                "latency": round(ours_latency / peer[latency_key]["ten_steps"]["median_ms"], 2),
                "throughput": round(ours_throughput / peer[throughput_key]["steps_per_s"], 2),
                "timer_p99": round(ours_timers / _peer_timers(peer)["p99_ms"], 2),
            }
    return found


def _peer_timers(peer: Results) -> Results:
    """A peer's timer lateness measured like Perdure's: from the fire time it recorded."""
    timers: Results = peer["timers"].get("from_wake_time", peer["timers"])
    return timers


def _peer_rows(results: Results) -> list[tuple[str, str, str]]:
    lines = []
    compared = ratios(results)
    for name, peer in results.get("peers", {}).items():
        for label, latency_key, throughput_key in _variants(peer):
            ratio = compared[name + label]
            latency = peer[latency_key]["ten_steps"]
            lines.append(
                (
                    f"{name}{label}: 10-step workflow",
                    f"{latency['median_ms']:.1f} ms median, {latency['p99_ms']:.1f} ms p99",
                    f"Perdure ÷ {name} = {ratio['latency']} (lower is better)",
                )
            )
            rate = peer[throughput_key]
            lines.append(
                (
                    f"{name}{label}: throughput {rate['workflows']}x{rate['steps']}",
                    f"{rate['steps_per_s']:.0f} steps/s",
                    f"Perdure ÷ {name} = {ratio['throughput']} (higher is better)",
                )
            )
        timers = {**peer["timers"], **_peer_timers(peer)}
        lines.append(
            (
                f"{name}: timers ({timers['workflows']} x {timers['sleep_s']} s)",
                f"lateness {timers['median_ms']:.1f} median, {timers['p99_ms']:.1f} p99 ms",
                f"p99: Perdure ÷ {name} = {compared[name]['timer_p99']}",
            )
        )
    return lines


def print_table(results: Results) -> None:
    """The table of figures."""
    table = rows(results)
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    print()
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def write(results: Results, out: Path) -> list[Path]:
    """results.json and (after a whole run) chart.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    data.write_text(json.dumps(results, indent=2, default=str))
    if not {"ceiling", "latency", "throughput"} <= set(results):  # `--only`: no chart
        return [data]
    chart = out / "chart.png"
    _chart(results, chart)
    return [data, chart]


def _chart(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    runs = results["throughput"]
    floor = results.get("floor")
    figure, (per_step, rates, latency) = plt.subplots(1, 3, figsize=(15, 4))
    per_step_bars = {
        "commit (ceiling)": results["ceiling"]["commit_1"]["median_ms"],
        **({"floor, sequential": floor["per_step_ms"]} if floor else {}),
        "sequential": results["latency"]["per_step_ms"],
        **{f"tp {key}": run["per_step_ms"] for key, run in runs.items()},
    }
    rate_bars = {
        **({"floor": floor["throughput"]["steps_per_s"]} if floor else {}),
        **{key: run["steps_per_s"] for key, run in runs.items()},
    }
    latencies = {
        **({"floor": floor["ten_steps"]["median_ms"]} if floor else {}),
        "perdure": results["latency"]["ten_steps"]["median_ms"],
    }
    # The peers, in each panel where they ran the shape (1,000 x 10 beside our 2wx10).
    for name, peer in results.get("peers", {}).items():
        for label, latency_key, throughput_key in _variants(peer):
            latencies[name + label] = peer[latency_key]["ten_steps"]["median_ms"]
            rate_bars[name + label] = peer[throughput_key]["steps_per_s"]
    _bars(per_step, "cost per step (ms)", per_step_bars, "#4a7ab5")
    _bars(rates, "throughput (steps/s)", rate_bars, "#5a9e6f")
    _bars(latency, "10-step workflow, median (ms)", latencies, "#b5834a")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _bars(axes: Any, title: str, bars: dict[str, float], color: str) -> None:
    axes.bar(list(bars), list(bars.values()), color=color)
    axes.set_title(title)
    axes.tick_params(axis="x", rotation=30)
