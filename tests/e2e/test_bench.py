"""The benchmark suite's smoke run: every shape completes and reports well-formed figures.
Speed is never asserted here: `make bench` measures it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import peer_runs
from tests.fixtures.cluster import REPO_ROOT


def numbers(value: object) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, dict):
        return [n for item in value.values() for n in numbers(item)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    return []


def test_the_quick_profile_runs_every_shape(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--no-peers", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        # Its recovery shape waits for a killed worker's lease: a 3 s one, not 10 s.
        env={**os.environ, "PERDURE_LEASE_TTL": "3"},
    )
    assert done.returncode == 0, done.stdout + done.stderr

    results = json.loads((tmp_path / "results.json").read_text())
    shapes = {"ceiling", "latency", "api", "remote", "streams", "throughput", "timers", "signals"}
    shapes.update({"recovery", "floor", "timers_at_once"})
    assert shapes | {"chat", "loop", "big_journal"} <= set(results)
    assert {"commit_1", "commit_16", "grpc"} == set(results["ceiling"])
    assert {"2wx10", "1wx10", "2wx100"} <= set(results["throughput"])
    assert results["timers"]["early"] == 0
    # The floor played its workflows; every timer due at once fired, none before its moment.
    assert results["floor"]["throughput"]["workflows"] == 20
    assert (
        results["floor"]["ten_steps"]["median_ms"] > results["floor"]["start_complete"]["median_ms"]
    )
    at_once = results["timers_at_once"]
    assert at_once["workflows"] == 20 and at_once["early"] == 0 and at_once["fired_per_s"] > 0
    assert results["throughput"]["2wx10"]["starts_per_s"] > 0
    figures = numbers({k: v for k, v in results.items() if k != "machine"})
    assert figures and all(math.isfinite(n) and n >= 0 for n in figures)
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
    assert "per-step overhead" in done.stdout and "recovery after SIGKILL" in done.stdout
    assert "10 remote steps side by side" in done.stdout
    assert "describe a run: gRPC / HTTP+JSON" in done.stdout
    # The push path: every frame read once and in order (checked by the shape), with targets.
    streams = results["streams"]
    assert streams["result"]["runs"] == 3 and streams["result"]["target_ms"] == 2.0
    assert (streams["first_frame"]["samples"], streams["sustained"]["frames"]) == (5, 200)
    assert (
        "result seen by the client" in done.stdout and "stream frame, emit → reader" in done.stdout
    )
    # Beside the result's target, its floor: the same hops between bare processes, measured.
    assert streams["result"]["bare_hops"]["runs"] == 3
    assert "floor: the same hops bare" in done.stdout
    # The hot path's rows carry their targets, and the floor is a row of its own.
    assert "architecture floor" in done.stdout and "target ≤ 4 ms" in done.stdout
    assert "starts through the gateway" in done.stdout and "timers due at once" in done.stdout
    # The long loops: measured at both ends of the chat, the loop done in one run, and the
    # large journal (small here, under every limit) completed after its worker's kill.
    chat, loop, big = results["chat"], results["loop"], results["big_journal"]
    assert (chat["turns"], chat["early"]["turns"], chat["late"]["turns"]) == (50, [6, 15], [40, 49])
    assert all(
        chat[end][key] > 0 for end in ("early", "late") for key in ("wall_ms", "journal_bytes")
    )
    assert (loop["completed"], loop["steps"]) == (True, 200)
    assert loop["rss"]["peak_mib"] >= loop["rss"]["end_mib"] > 0
    assert big["completed"], big
    assert big["outputs"] == 5 and big["journal_mib"] >= 9.9 and big["replay_s"] is not None
    assert "chat turn, 6-15 → 40-49 of 50" in done.stdout and "kill -9 halfway" in done.stdout
    # Flow control: both tenants served, the rate's steps all granted, and the budget never
    # overspent (sampled throughout, a worker killed under the fan-out).
    fairness, rate, budget = (results["flow"][part] for part in ("fairness", "rate", "budget"))
    assert fairness["busy"]["p99_ms"] > 0 and fairness["idle"]["p99_ms"] > 0
    assert rate["steps"] == 60 and rate["per_s"] > 0
    assert budget["overshoot_units"] == 0 and budget["samples"] > 0
    assert 0 < budget["spent_units"] <= budget["limit_units"]
    assert "small tenant's schedule-to-start" in done.stdout
    # Cells: the same throughput run on one cell and on two, every run in one of the cells.
    cells = results["cells"]
    assert set(cells) == {"1", "2"}
    assert cells["1"]["runs_per_cell"] == [20] and sum(cells["2"]["runs_per_cell"]) == 20
    assert all(cells[count]["steps_per_s"] > 0 for count in cells)
    assert "2 cells: throughput 20x10" in done.stdout


def test_a_peer_that_is_not_installed_is_skipped_with_a_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(peer_runs.PEERS, "absent", ("no_such_package_xyz", "bench.peers.x", False))

    assert peer_runs.run_peer("absent", "quick", "") is None
    assert "skipped: `no_such_package_xyz` is not installed" in capsys.readouterr().out
