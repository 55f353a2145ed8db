"""The replay gate against live runs and saved histories: runs of tests/e2e/gate_workflows.py
wait for a signal after two steps; `perdure replay` (a subprocess, through the gateway) passes
the same code and code that only adds a step after the wait, and reports code whose steps are
reordered; a saved history replays the same way, with the CLI and with the pytest helper.

One cluster for the module, its worker serving tests/e2e/gate_workflows.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker.testing import replay
from tests.e2e import gate_appended, gate_reordered
from tests.fixtures.cluster import NODE_SDK, REPO_ROOT, Cluster, free_port, require_node, wait_until

MODULE = "tests.e2e.gate_workflows"
WAIT = 90.0  # upper bound of any wait for a run to get somewhere
WAITING = ("gate-1", "gate-2")  # gate_order runs waiting for "ship"
DONE = "gate-done"  # a gate_order run that completed
OTHER = "gate-other"  # a gate_other run (a type the changed code does not have)


def perdure(*args: str) -> subprocess.CompletedProcess[str]:
    """`perdure ARGS...` as a shell runs it, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "perdure.cli", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def gate(shared: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return perdure("replay", "--gateway", shared.gateway, *args)


@pytest.fixture(scope="module")
def runs(shared: Cluster) -> dict[str, str]:
    """The runs, each where the tests need it; their run ids by workflow id."""
    with shared.client() as client:
        for workflow_id in (*WAITING, DONE):
            client.start_workflow("gate_order", 5, workflow_id=workflow_id)
        client.start_workflow("gate_other", None, workflow_id=OTHER)
        for workflow_id in (*WAITING, DONE, OTHER):
            wait_until(lambda w=workflow_id: _waiting(client, w), WAIT, f"{workflow_id} to wait")
        client.signal(DONE, "ship", None)
        done = client.wait(DONE, timeout=WAIT).workflow
        assert done.status == wf.WORKFLOW_STATUS_COMPLETED, done
        return {w: client.describe(w).workflow.run_id for w in (*WAITING, DONE, OTHER)}


def _waiting(client: Client, workflow_id: str) -> bool:
    return client.describe(workflow_id).workflow.status == wf.WORKFLOW_STATUS_WAITING


def test_unchanged_code_replays_every_open_run(shared: Cluster, runs: dict[str, str]) -> None:
    done = gate(shared, "--module", MODULE)
    assert done.returncode == 0, done.stdout + done.stderr
    for workflow_id in (*WAITING, OTHER):
        assert runs[workflow_id] in done.stdout
    assert runs[DONE] not in done.stdout  # closed: a deploy does not replay it
    assert "3 replayed, 3 passed, 0 non-deterministic, 0 skipped" in done.stdout
    # --all adds closed runs, replayed to their end; --limit bounds the runs fetched.
    every = gate(shared, "--module", MODULE, "--all", "--type", "gate_order", "--json")
    assert every.returncode == 0, every.stdout + every.stderr
    report = json.loads(every.stdout)
    assert report["summary"] == {
        "replayed": 3,
        "passed": 3,
        "non_deterministic": 0,
        "errors": 0,
        "skipped": 0,
    }
    [closed] = [run for run in report["runs"] if run["workflow_id"] == DONE]
    assert closed["detail"] == "replayed to its end (result)"
    limited = gate(shared, "--module", MODULE, "--limit", "1", "--since", "1h")
    assert "1 replayed, 1 passed" in limited.stdout, limited.stdout + limited.stderr


def test_reordered_steps_are_reported(shared: Cluster, runs: dict[str, str]) -> None:
    done = gate(shared, "--module", "tests.e2e.gate_reordered")
    assert done.returncode == 1, done.stdout + done.stderr
    for workflow_id in WAITING:
        [row] = [line for line in done.stdout.splitlines() if line.startswith(f"{workflow_id} ")]
        assert runs[workflow_id] in row and "NON-DETERMINISTIC" in row
        assert "step_completed 'reserve'" in row and "step 'charge'" in row
    assert "2 replayed, 0 passed, 2 non-deterministic, 1 skipped (not in --module)" in done.stdout
    as_json = gate(shared, "--module", "tests.e2e.gate_reordered", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    found = {run["workflow_id"]: run for run in report["runs"]}
    assert found[WAITING[0]]["run_id"] == runs[WAITING[0]]
    assert found[WAITING[0]]["outcome"] == "non_deterministic"
    assert (found[WAITING[0]]["position"], found[WAITING[0]]["expected"]) == (
        0,
        "step_completed 'reserve'",
    )
    assert found[WAITING[0]]["found"] == "step 'charge'"
    assert found[OTHER]["outcome"] == "skipped"


def test_the_reordering_behind_a_patch_passes(shared: Cluster, runs: dict[str, str]) -> None:
    done = gate(shared, "--module", "tests.e2e.gate_patched")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 replayed, 2 passed, 0 non-deterministic, 1 skipped" in done.stdout


def test_steps_added_after_the_frontier_pass(shared: Cluster, runs: dict[str, str]) -> None:
    done = gate(shared, "--module", "tests.e2e.gate_appended")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 replayed, 2 passed, 0 non-deterministic, 1 skipped" in done.stdout


def test_a_saved_history_replays_with_the_cli_and_the_pytest_helper(
    shared: Cluster, runs: dict[str, str], tmp_path: Path
) -> None:
    saved = perdure("workflow", "--address", shared.gateway, "history", WAITING[0], "--json")
    assert saved.returncode == 0, saved.stderr
    path = tmp_path / f"{WAITING[0]}.json"
    path.write_text(saved.stdout)
    assert json.loads(saved.stdout)["workflow"]["runId"] == runs[WAITING[0]]

    changed = perdure("replay", "--module", "tests.e2e.gate_reordered", "--file", str(path))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert runs[WAITING[0]] in changed.stdout and "1 non-deterministic" in changed.stdout
    appended = perdure("replay", "--module", "tests.e2e.gate_appended", "--file", str(path))
    assert appended.returncode == 0, appended.stdout + appended.stderr

    assert replay(gate_appended, path).outcome == "passed"
    with pytest.raises(AssertionError, match=r"non-deterministic at call #0"):
        replay(gate_reordered, path)


def test_node_code_is_gated_against_the_same_runs(shared: Cluster, runs: dict[str, str]) -> None:
    """The Node.js SDK's gate replays the runs a Python worker recorded, through the gateway."""
    node = require_node()

    def node_gate(module: str) -> subprocess.CompletedProcess[str]:
        gate = NODE_SDK / "bin" / "perdure-replay.js"
        return subprocess.run(
            [node, str(gate), "--module", module, "--gateway", shared.gateway],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    same = node_gate("tests/e2e/gate_workflows.mjs")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "2 replayed, 2 passed, 0 non-deterministic, 1 skipped" in same.stdout
    reordered = node_gate("tests/e2e/gate_reordered.mjs")
    assert reordered.returncode == 1, reordered.stdout + reordered.stderr
    for workflow_id in WAITING:
        [row] = [
            line for line in reordered.stdout.splitlines() if line.startswith(f"{workflow_id} ")
        ]
        assert runs[workflow_id] in row
        assert "step_completed 'reserve'" in row and "step 'charge'" in row


def test_the_gate_refuses_what_it_cannot_run(shared: Cluster, tmp_path: Path) -> None:
    unknown = gate(shared, "--module", "tests.e2e.no_such_module")
    assert unknown.returncode == 2
    assert "cannot import --module 'tests.e2e.no_such_module'" in unknown.stderr
    since = gate(shared, "--module", MODULE, "--since", "7 days")
    assert since.returncode == 2 and "'7 days' is not a duration" in since.stderr
    nowhere = perdure("replay", "--module", MODULE, "--gateway", f"127.0.0.1:{free_port()}")
    assert nowhere.returncode == 2
    assert "the gateway at 127.0.0.1" in nowhere.stderr and "UNAVAILABLE" in nowhere.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    unreadable = perdure("replay", "--module", MODULE, "--file", str(broken))
    assert unreadable.returncode == 2 and "a saved history is a JSON object" in unreadable.stderr
