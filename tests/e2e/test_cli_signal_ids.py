"""`perdure workflow signal` sends each signal with an id, so that sending the command again (a
retry after a lost answer) gives the run one signal, not two. (`perdure approve` decides an
approval record, which is decided once: tests/e2e/test_approvals.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import REPO_ROOT, Cluster


def perdure(cluster: Cluster, data_dir: Path, *args: str) -> str:
    """Run the CLI against the cluster's gateway; return what it printed."""
    env = {k: v for k, v in os.environ.items() if k != "PERDURE_API_KEY"}
    env["PERDURE_DATA_DIR"] = str(data_dir)  # no key of a `perdure dev` nearby
    done = subprocess.run(
        [sys.executable, "-m", "perdure.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def received(cluster: Cluster, workflow_id: str) -> list[tuple[str, str, object]]:
    """The run's signals: (name, signal id, payload)."""
    with cluster.client() as client:
        return [
            (e.name, e.signal_id, from_payload(e.payload))
            for e in client.history(workflow_id)
            if e.event_type == wf.EVENT_TYPE_SIGNAL_RECEIVED
        ]


def test_a_command_sent_again_with_its_signal_id_is_one_signal(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.start_worker("registrar", task_queue="idle").kill()  # its types stay registered
    with cluster.client() as client:
        client.start_workflow("five_steps", {"ledger": "-"}, workflow_id="a-1", task_queue="idle")
    gateway = ("--address", cluster.gateway)

    signal = ("workflow", *gateway, "signal", "a-1", "steer", "--payload", '{"go": 1}')
    first = json.loads(perdure(cluster, tmp_path, *signal))
    repeated = json.loads(perdure(cluster, tmp_path, *signal, "--signal-id", first["signal_id"]))
    assert (first["accepted"], repeated["accepted"]) == (True, False)

    assert received(cluster, "a-1") == [("steer", first["signal_id"], {"go": 1})]
