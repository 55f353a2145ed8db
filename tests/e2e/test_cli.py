"""The `perdure` command as a person uses it: `perdure dev`, then `perdure workflow ...`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.fixtures.cluster import REPO_ROOT, wait_until
from tests.fixtures.dev import cli_env, perdure, running_dev


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`perdure dev` running on its own ports and data directory."""
    with running_dev(tmp_path) as running:
        yield running


def approve(address: str, workflow_id: str) -> None:
    """`perdure approve --address ADDRESS WORKFLOW_ID`: the example waits for it."""
    done = subprocess.run(
        [sys.executable, "-m", "perdure.cli", "approve", "--address", address, workflow_id],
        cwd=REPO_ROOT,
        env=cli_env(address),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{workflow_id}: approved" in done.stdout


def test_dev_cluster_runs_the_example_from_the_cli(
    dev_cluster: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    address, dev, log = dev_cluster
    assert "API key    prd_" in log.read_text()  # dev made an admin key and said so
    keyless = subprocess.run(
        [sys.executable, "-m", "perdure.cli", "workflow", "--address", address, "list"],
        cwd=REPO_ROOT,
        env={**cli_env(address), "PERDURE_DATA_DIR": str(log.parent)},  # a directory with none
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert keyless.returncode == 1 and "UNAUTHENTICATED" in keyless.stderr
    start = ("start", "research_agent", "--input", '{"topic": "fencing"}', "--id", "cli-1")
    started = perdure(address, *start)
    assert started.returncode == 0, started.stderr
    approve(address, "cli-1")  # the example waits for a human's approval before its report
    done = perdure(address, *start, "--wait")
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert described["workflow"]["status"] == "WORKFLOW_STATUS_COMPLETED"
    assert described["workflow"]["result"]["topic"] == "fencing"
    assert [s["step_id"] for s in described["steps"]] == [
        "create_plan",
        "research_1",
        "research_2",
        "analyze",
        "recommend",
        "report",
        "notify",
    ]

    history = perdure(address, "history", "cli-1")
    assert history.returncode == 0, history.stderr
    types = [json.loads(line)["event_type"] for line in history.stdout.splitlines()]
    assert types[0] == "EVENT_TYPE_WORKFLOW_STARTED"
    assert types[-1] == "EVENT_TYPE_WORKFLOW_COMPLETED"
    assert types.count("EVENT_TYPE_STEP_COMPLETED") == 7
    assert (
        types.count("EVENT_TYPE_SIGNAL_RECEIVED") == types.count("EVENT_TYPE_SIGNAL_CONSUMED") == 1
    )

    listed = perdure(address, "list")
    assert "cli-1\tresearch_agent\tCOMPLETED" in listed.stdout

    # The web UI's address, with the admin key in its fragment; the page, and the HTTP API
    # with that key.
    [(ui, key)] = re.findall(r"web UI +(http://\S+/)#key=(prd_\S+)", log.read_text())
    assert requests.get(ui, timeout=30).status_code == 200
    over_http = requests.get(
        f"{ui}v1/workflows/cli-1", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert over_http.json()["workflow"]["status"] == "WORKFLOW_STATUS_COMPLETED"

    again = perdure(
        address, "start", "research_agent", "--input", '{"topic": "fencing"}', "--id", "cli-1"
    )
    assert json.loads(again.stdout).get("started", False) is False

    bad_json = perdure(address, "start", "research_agent", "--input", "{not json")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    missing = perdure(address, "describe", "no-such-run")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr

    dev.send_signal(signal.SIGTERM)
    assert dev.wait(timeout=60) == 0, log.read_text()
    assert "worker" in log.read_text() and "stopped" in log.read_text()


def test_dev_restarts_a_killed_worker_which_resumes_the_workflow(
    dev_cluster: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    address, _, log = dev_cluster
    started = perdure(
        address,
        "start",
        "research_agent",
        "--id",
        "demo-kill",
        "--input",
        '{"topic": "recovery", "slow_seconds": 3}',
    )
    assert started.returncode == 0, started.stderr
    approve(address, "demo-kill")  # kept until the run reaches its approval

    def research_running() -> bool:
        steps = json.loads(perdure(address, "describe", "demo-kill").stdout).get("steps", [])
        completed = [s["step_id"] for s in steps if s["status"] == "STEP_STATUS_COMPLETED"]
        return completed == ["create_plan"]

    wait_until(research_running, 60, "the slow research step to start")
    (worker_pid,) = re.findall(r"worker \S+:(\d+) connected:", log.read_text())
    os.kill(int(worker_pid), signal.SIGKILL)

    wait_until(
        lambda: '"WORKFLOW_STATUS_COMPLETED"' in perdure(address, "describe", "demo-kill").stdout,
        90,
        "the restarted worker to finish the workflow",
    )
    described = json.loads(perdure(address, "describe", "demo-kill").stdout)
    fences = {s["step_id"]: int(s.get("fence", 0)) for s in described["steps"]}
    assert fences["create_plan"] == 1 and fences["notify"] == 2
    assert "the worker exited with -9; starting it again" in log.read_text()
    assert "Skipping completed step: create_plan" in log.read_text()


def test_dev_runs_open_only_when_asked_and_says_so_loudly(tmp_path: Path) -> None:
    with running_dev(tmp_path, "--insecure") as (address, _, log):
        assert "INSECURE: no API keys" in log.read_text()
        assert "AUTHENTICATION IS OFF" in log.read_text()  # each service warns too
        listed = subprocess.run(
            [sys.executable, "-m", "perdure.cli", "workflow", "--address", address, "list"],
            cwd=REPO_ROOT,
            env={**os.environ, "PERDURE_DATA_DIR": str(tmp_path)},  # no key anywhere
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert listed.returncode == 0, listed.stderr
