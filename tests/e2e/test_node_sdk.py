"""The Node.js SDK's own suite (`node --test` in sdk/node), against a real cluster whose two
scheduler replicas move worker sessions every second or so."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from tests.fixtures.cluster import NODE_SDK, Cluster, require_node

# About 30 s alone, a few times that on a loaded machine. Past it, the suite hangs (a test
# left a worker that never exits): the report then names what ran last.
SUITE_TIMEOUT = 240.0


@pytest.mark.timeout(SUITE_TIMEOUT + 60)
def test_the_node_sdk_suite_passes_against_a_live_cluster(
    start_cluster: Callable[..., Cluster],
) -> None:
    node = require_node()
    cluster = start_cluster(replicas={"scheduler": 2}, PERDURE_SESSION_MAX_AGE="1")
    env = {
        **cluster.env(),
        "PERDURE_GATEWAY": cluster.gateway,
        "PERDURE_HISTORY": cluster.target("history"),
        "PERDURE_SCHEDULER": cluster.target("scheduler"),
    }
    tests = sorted(
        str(path.relative_to(NODE_SDK)) for path in (NODE_SDK / "test").glob("*.test.js")
    )
    assert tests, "sdk/node/test has no *.test.js files"

    try:
        finished = subprocess.run(
            [node, "--test", *tests],
            cwd=NODE_SDK,
            env=env,
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as hung:
        partial = (hung.stdout or b"").decode(errors="replace")[-6000:]
        pytest.fail(f"the Node.js suite did not end in {SUITE_TIMEOUT:.0f} s; its end:\n{partial}")

    report = finished.stdout + finished.stderr
    assert finished.returncode == 0, report
    assert "# fail 0" in report and "# skipped 0" in report, report
    moved = sum(
        p.output().count("to reconnect: the session reached its max age")
        for p in cluster.processes
        if p.name == "scheduler"
    )
    assert moved > 0
