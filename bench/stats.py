"""Small statistics over lists of seconds, reported in milliseconds."""

from __future__ import annotations

import statistics
from typing import Any


def percentile(values: list[float], fraction: float) -> float:
    """The value below which `fraction` of the values lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    """Median, p99 and max of durations in seconds, as milliseconds."""
    if not seconds:
        return {"median_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    return {
        "median_ms": round(statistics.median(seconds) * 1000, 3),
        "p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3),
    }


def rates(workflows: int, steps: int, seconds: float) -> dict[str, Any]:
    """The throughput figures of `workflows` workflows of `steps` steps done in `seconds`."""
    return {
        "workflows": workflows,
        "steps": steps,
        "seconds": round(seconds, 3),
        "workflows_per_s": round(workflows / seconds, 1),
        "steps_per_s": round(workflows * steps / seconds, 1),
        "per_step_ms": round(seconds * 1000 / (workflows * steps), 3),
    }
