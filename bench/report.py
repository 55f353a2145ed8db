"""The benchmark's outputs: a table on the terminal, results.json and chart.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Results = dict[str, Any]


def rows(results: Results) -> list[tuple[str, str, str]]:
    """(figure, value, comparison) lines of the table."""
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
    if "latency" in results:
        lat = results["latency"]
        lines.append(
            (
                "10-step workflow, start → result",
                f"{lat['ten_steps']['median_ms']:.1f} ms median, "
                f"{lat['ten_steps']['p99_ms']:.1f} ms p99",
                "target ≤ 20 ms",
            )
        )
        lines.append(
            (
                "start + complete (0 steps)",
                f"{lat['start_complete']['median_ms']:.1f} ms median",
                "",
            )
        )
        lines.append(
            (
                "per-step overhead",
                f"{lat['per_step_ms']:.2f} ms",
                f"{lat['per_step_vs_commit']}x commit (target ≤ 5x)",
            )
        )
    for key, run in results.get("throughput", {}).items():
        lines.append(
            (
                f"throughput {key}",
                f"{run['steps_per_s']:.0f} steps/s, {run['workflows_per_s']:.0f} wf/s, "
                f"start p50 {run['schedule_to_start']['median_ms']:.1f} / p99 "
                f"{run['schedule_to_start']['p99_ms']:.1f} ms",
                f"{run['per_step_ms']:.2f} ms/step",
            )
        )
    if "timers" in results:
        tm = results["timers"]
        lines.append(
            (
                f"timers ({tm['workflows']} x {tm['sleep_s']} s)",
                f"lateness {tm['median_ms']:.1f} median, "
                f"{tm['p99_ms']:.1f} p99, {tm['max_ms']:.1f} max ms",
                f"{tm['early']} early (target p99 ≤ 20 ms)",
            )
        )
    if "signals" in results:
        sg = results["signals"]
        lines.append(
            (
                "signal → next step",
                f"{sg['median_ms']:.1f} ms median, {sg['p99_ms']:.1f} ms p99",
                "",
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


def print_table(results: Results) -> None:
    """The table of figures."""
    table = rows(results)
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    print()
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def write(results: Results, out: Path) -> tuple[Path, Path]:
    """results.json and chart.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    data.write_text(json.dumps(results, indent=2, default=str))
    chart = out / "chart.png"
    _chart(results, chart)
    return data, chart


def _chart(results: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results.get("throughput", {})
    figure, (per_step, rates) = plt.subplots(1, 2, figsize=(11, 4))
    labels = ["commit (ceiling)"] + [f"tp {key}" for key in runs]
    values = [results["ceiling"]["commit_1"]["median_ms"]] + [
        run["per_step_ms"] for run in runs.values()
    ]
    if "latency" in results:
        labels.insert(1, "sequential")
        values.insert(1, results["latency"]["per_step_ms"])
    per_step.bar(labels, values, color="#4a7ab5")
    per_step.set_title("cost per step (ms)")
    per_step.tick_params(axis="x", rotation=30)
    rates.bar(
        [f"tp {key}" for key in runs],
        [run["steps_per_s"] for run in runs.values()],
        color="#5a9e6f",
    )
    rates.set_title("throughput (steps/s)")
    rates.tick_params(axis="x", rotation=30)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
