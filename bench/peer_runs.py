"""Running the peers (DBOS, Temporal), each in a process of its own, when installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

from bench.shapes import Progress

PEERS = {
    # name: (the package it needs, its module under bench.peers, whether it needs our database)
    "dbos": ("dbos", "bench.peers.dbos_peer", True),
    "temporal": ("temporalio", "bench.peers.temporal_peer", False),
}
PEER_TIMEOUT = 600.0


def run_peer(name: str, profile: str, dsn: str) -> dict[str, Any] | None:
    """The peer's figures, or None (with a line saying why) when it is not installed."""
    package, module, uses_database = PEERS[name]
    progress = Progress(name)
    if importlib.util.find_spec(package) is None:
        progress.done(f"skipped: `{package}` is not installed (pip install --group bench)")
        return None
    command = [sys.executable, "-m", module, "--profile", profile]
    if uses_database:
        command += ["--dsn", dsn]
    progress.update(0, 1)
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=PEER_TIMEOUT, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        progress.done(f"failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    progress.done(f"10 steps {result['latency']['ten_steps']['median_ms']:.1f} ms median")
    return result
