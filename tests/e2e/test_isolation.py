"""One run never hurts another: a run whose journal takes many pages to load completes while
the worker's other runs keep their leases (Python and Node.js workers); a closed run is never
handed out again; describe, history and wait work for runs whose outputs add up past gRPC's
default 4 MiB; and a run stranded with no lease, no task and no wake-up (a scheduler database
reset to empty, a fence mark above the scheduler's counter) is listed as stuck and made due
again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import requests

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.e2e.isolation_workflows import MIB
from tests.fixtures.cluster import Cluster, Process, wait_until

MODULE = "tests.e2e.isolation_workflows"
WAIT = 90.0  # upper bound of any wait for a run to get somewhere
# Small enough that a test writes a journal of many pages in a few MiB.
JOURNAL_PAGE_BYTES = MIB
STUCK_AFTER = "2"  # seconds a run may be stranded before the sweep finds it
OTHERS = 6  # runs holding their leases while another run loads its large journal
SHARED_ENV = {
    "PERDURE_JOURNAL_PAGE_BYTES": str(JOURNAL_PAGE_BYTES),
    "PERDURE_STUCK_AFTER": STUCK_AFTER,
}
SHARED_CONCURRENCY = OTHERS + 4


def worker(shared: Cluster, name: str) -> Process:
    [process] = [p for p in shared.processes if p.name == name]
    return process


def service(shared: Cluster, name: str) -> Process:
    return next(p for p in shared.processes if p.name == name)


def task_row(shared: Cluster, workflow_id: str) -> dict[str, Any]:
    """The run's own task in the scheduler's table (empty: no row yet)."""
    with psycopg.connect(shared.dsn) as conn:
        cursor = conn.execute(
            "SELECT fence, closed, run_at, lease_owner FROM scheduler.tasks"
            " WHERE workflow_id = %s AND step_id = ''",
            [workflow_id],
        )
        found = cursor.fetchone()
        if found is None or cursor.description is None:
            return {}
        return dict(zip([c.name for c in cursor.description], found, strict=True))


def execute(shared: Cluster, statement: str, *params: object) -> None:
    with psycopg.connect(shared.dsn) as conn:
        conn.execute(statement, list(params))


def lines(ledger: Path, prefix: str) -> list[str]:
    if not ledger.exists():
        return []
    return [line for line in ledger.read_text().splitlines() if line.startswith(prefix)]


def start_gated(client: Client, tmp_path: Path, count: int, gate: Path) -> list[str]:
    """Start `count` runs that each hold their lease at the gate; return their ids once every
    one holds it."""
    ids = []
    for index in range(count):
        ledger = tmp_path / f"gated-{index}"
        workflow_id = f"{tmp_path.name}-gated-{index}"
        params = {"ledger": str(ledger), "gate": str(gate)}
        client.start_workflow("gated", params, workflow_id=workflow_id)
        ids.append((workflow_id, ledger))
    wait_until(
        lambda: all(lines(ledger, "start held") for _, ledger in ids),
        WAIT,
        "every gated run to hold its lease",
    )
    return [workflow_id for workflow_id, _ in ids]


# -- message limits ----------------------------------------------------------------------------


def test_describe_history_and_wait_work_for_a_run_with_more_than_4_mib_of_outputs(
    client: Client, tmp_path: Path
) -> None:
    params = {"ledger": str(tmp_path / "ledger"), "count": 5, "size": MIB}
    client.start_workflow("bulky", params, workflow_id="large-outputs")

    done = client.wait("large-outputs", timeout=WAIT)

    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert done.ByteSize() > 5 * MIB
    assert [len(from_payload(step.output)) for step in done.steps] == [MIB] * 5
    events = list(client.history("large-outputs"))
    outputs = [e for e in events if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    assert [len(from_payload(event.payload)) for event in outputs] == [MIB] * 5
    assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_COMPLETED


# -- a run with a large journal ----------------------------------------------------------------


def test_a_run_loaded_in_pages_completes_and_the_workers_other_runs_keep_their_leases(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    others = start_gated(client, tmp_path, OTHERS, gate)
    params = {"ledger": str(tmp_path / "ledger"), "count": 7, "size": MIB, "reload": True}
    client.start_workflow("bulky", params, workflow_id="large-journal")

    done = client.wait("large-journal", timeout=WAIT)
    gate.touch()
    finished = [client.wait(workflow_id, timeout=WAIT) for workflow_id in others]

    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.workflow.result) == 7
    # Reloaded after its sleep, through pages and payload references: each step ran once.
    assert len(lines(tmp_path / "ledger", "output")) == 7
    assert [run.workflow.status for run in finished] == [wf.WORKFLOW_STATUS_COMPLETED] * OTHERS
    # Each held its one lease throughout: its step ran once, and nothing expired or was lost.
    for index in range(OTHERS):
        assert len(lines(tmp_path / f"gated-{index}", "held")) == 1
    log = worker(shared, "worker-main").output()
    assert "journal call failed" not in log
    lost = [line for line in log.splitlines() if "lease with fence" in line]
    assert [line for line in lost if "gated" in line] == [], lost
    assert "expired" not in service(shared, "scheduler").output()
    wait_until(
        lambda: task_row(shared, "large-journal").get("closed"), WAIT, "its tasks to be retired"
    )


def test_a_node_workers_run_loaded_in_pages_leaves_its_other_runs_alone(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    node = shared.start_node_worker("node-iso", "node-iso", tmp_path / "node-ledger")
    others = []
    for index in range(OTHERS):
        workflow_id = f"node-gated-{index}"
        client.start_workflow(
            "node_gated", {"gate": str(gate)}, workflow_id=workflow_id, task_queue="node-iso"
        )
        others.append(workflow_id)
    wait_until(
        lambda: len(lines(tmp_path / "node-ledger", '{"kind":"held"')) == OTHERS,
        WAIT,
        "every Node gated run to hold its lease",
    )
    bulky = {"count": 7, "size": MIB, "reload": True}
    client.start_workflow("node_bulky", bulky, workflow_id="node-large", task_queue="node-iso")

    done = client.wait("node-large", timeout=WAIT)
    gate.touch()
    finished = [client.wait(workflow_id, timeout=WAIT) for workflow_id in others]

    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.workflow.result) == 7
    assert [run.workflow.status for run in finished] == [wf.WORKFLOW_STATUS_COMPLETED] * OTHERS
    assert len(lines(tmp_path / "node-ledger", '{"kind":"held"')) == OTHERS
    assert "journal call failed" not in node.output()
    assert "expired" not in service(shared, "scheduler").output()


# -- closed runs -------------------------------------------------------------------------------


def test_a_terminated_run_is_never_handed_out_again(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    [leased] = start_gated(client, tmp_path, 1, gate)
    params = {"ledger": str(tmp_path / "sleeper"), "count": 0, "size": 0, "reload": True}
    client.start_workflow("bulky", params, workflow_id="terminated-waiting")
    waiting = wf.WORKFLOW_STATUS_WAITING
    sleeper = "terminated-waiting"
    wait_until(lambda: client.describe(sleeper).workflow.status == waiting, WAIT, "its timer")

    client.terminate(leased, "test")
    client.terminate("terminated-waiting", "test")
    wait_until(lambda: task_row(shared, "terminated-waiting").get("closed"), WAIT, "the close")
    gate.touch()  # the step under the terminated run's lease ends; its record is refused
    wait_until(lambda: task_row(shared, leased)["lease_owner"] is None, WAIT, "the release")

    for workflow_id in (leased, "terminated-waiting"):
        row = task_row(shared, workflow_id)
        assert row["closed"] and row["run_at"] is None, row  # never due again
    log = worker(shared, "worker-main").output()
    assert log.count(f"running gated workflow {leased} (fence") == 1
    assert log.count("running bulky workflow terminated-waiting (fence") == 1
    assert len(lines(tmp_path / "gated-0", "after")) == 0


# -- stranded runs -----------------------------------------------------------------------------


def test_a_stranded_run_is_listed_as_stuck_and_made_due_again_above_the_fence_mark(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    # A run due on a queue whose worker has gone, then stranded: the scheduler's database is
    # reset to empty (its task and fence counter are gone), and history's fence mark is above
    # any counter the scheduler would start from.
    lonely = shared.start_worker("lonely", module=MODULE, task_queue="lonely")
    lonely.kill()
    params = {"ledger": str(tmp_path / "ledger"), "count": 1, "size": 1}
    client.start_workflow("bulky", params, workflow_id="stranded", task_queue="lonely")
    wait_until(lambda: task_row(shared, "stranded").get("run_at"), WAIT, "its task")
    execute(shared, "DELETE FROM scheduler.tasks WHERE workflow_id = 'stranded'")
    # As a lease of fence 40 that loaded it would leave it (a mark no load reached yet is the
    # next grant's own: a chain's next run, see history/outbox.py).
    execute(
        shared,
        "UPDATE history.workflows SET fence = 40, loaded_event_count = 1"
        " WHERE workflow_id = 'stranded'",
    )

    wait_until(lambda: "stranded" in listed_stuck(shared), WAIT, "the run to be listed as stuck")
    assert client.describe("stranded").workflow.HasField("stuck_time")
    over_http = requests.get(f"http://{shared.http_address}/v1/workflows?stuck=true", timeout=30)
    assert [run["workflow_id"] for run in over_http.json()["workflows"]] == ["stranded"]
    history_log = service(shared, "history").output()
    assert "workflow stranded is RUNNING with no lease, no task and no wake-up" in (history_log)
    assert task_row(shared, "stranded")["fence"] >= 40

    shared.start_worker("lonely-again", module=MODULE, task_queue="lonely")
    done = client.wait("stranded", timeout=WAIT)
    assert done.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert done.workflow.fence == 41
    assert not done.workflow.HasField("stuck_time")
    assert "stranded" not in listed_stuck(shared)


def listed_stuck(shared: Cluster) -> str:
    """What `perdure workflow list --stuck` prints."""
    command = ["workflow", "--address", shared.gateway, "list", "--stuck"]
    listed = subprocess.run(
        [sys.executable, "-m", "perdure.cli", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return listed.stdout
