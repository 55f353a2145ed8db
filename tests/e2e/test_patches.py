"""Patches end to end, in both SDKs: code changed behind ctx.patched is deployed while a run of
the old code waits (its worker killed with SIGKILL); the old run keeps the steps it went
through on the old code and takes the new code past them, a new run takes the new code
throughout, neither parks, and each journal holds one marker per patch it took. Once the old
path is removed (deprecate_patch), a run that went through it parks naming the patch."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.worker._payload import to_payload
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.rpc import error_reason
from tests.fixtures.runs import result_of

WAIT = 60.0
SDKS = ("python", "node")
# The deployed code of workflow "release", by version (the Node.js worker's: RELEASE_CODE).
MODULES = {version: f"tests.e2e.patch_workflows_{version}" for version in ("v1", "v2", "v3")}
# One cluster for the module (a short lease TTL: a killed worker's lease, if it held one,
# expires soon); each test deploys its own workers, on a task queue of its own.
SHARED_ENV = {"PERDURE_LEASE_TTL": "2"}
SHARED_WORKER = None


def deploy(cluster: Cluster, sdk: str, version: str, queue: str, workdir: Path) -> Process:
    """A worker of `sdk` running version `version` of "release" on `queue`."""
    identity = f"{queue}-{version}"
    if sdk == "python":
        return cluster.start_worker(identity, module=MODULES[version], task_queue=queue)
    return cluster.start_node_worker(identity, queue, workdir / "ledger", RELEASE_CODE=version)


def start_and_wait_for_go(client: Client, workflow_id: str, queue: str) -> None:
    client.start_workflow("release", workflow_id=workflow_id, task_queue=queue)

    def waiting() -> bool:
        info = client.describe(workflow_id).workflow
        return info.status == wf.WORKFLOW_STATUS_WAITING and info.wait.name == "go"

    wait_until(waiting, WAIT, f"{workflow_id} to wait for signal 'go'")


def markers(client: Client, workflow_id: str) -> list[tuple[str, int]]:
    """The run's patch markers: (patch id, the position the code had reached)."""
    return [
        (event.name, event.position)
        for event in client.history(workflow_id)
        if event.event_type == wf.EVENT_TYPE_PATCH_RECORDED
    ]


@pytest.mark.parametrize("sdk", SDKS)
def test_an_old_run_keeps_its_path_and_a_new_run_takes_the_patched_code(
    shared: Cluster, client: Client, tmp_path: Path, sdk: str
) -> None:
    queue = f"{sdk}-patched"
    old, new = f"old-{sdk}", f"new-{sdk}"
    first = deploy(shared, sdk, "v1", queue, tmp_path)
    start_and_wait_for_go(client, old, queue)  # "prepare" ran on v1
    first.kill()
    deploy(shared, sdk, "v2", queue, tmp_path)
    start_and_wait_for_go(client, new, queue)
    for run in (old, new):
        client.signal(run, "go")
    finished = {run: client.wait(run, timeout=WAIT) for run in (old, new)}

    assert [d.workflow.status for d in finished.values()] == [wf.WORKFLOW_STATUS_COMPLETED] * 2
    # The old run replays its v1 "prepare" (patched: False) and, reaching "finish" for the
    # first time on v2, takes the new step; the new run is v2 throughout.
    assert result_of(finished[old]) == {"prepare": "v1", "finish": "v2"}
    assert result_of(finished[new]) == {"prepare": "v2", "finish": "v2"}
    # One marker per patch taken, naming where the code was (prepare 0, wait 1, finish 2).
    assert markers(client, old) == [("finish-v2", 2)]
    assert markers(client, new) == [("prepare-v2", 0), ("finish-v2", 2)]


@pytest.mark.parametrize("sdk", SDKS)
def test_a_deprecated_patch_parks_a_run_that_took_the_old_path(
    shared: Cluster, client: Client, tmp_path: Path, sdk: str
) -> None:
    queue = f"{sdk}-deprecated"
    old, patched = f"old-path-{sdk}", f"new-path-{sdk}"
    v1 = deploy(shared, sdk, "v1", queue, tmp_path)
    start_and_wait_for_go(client, old, queue)
    v1.kill()
    v2 = deploy(shared, sdk, "v2", queue, tmp_path)
    start_and_wait_for_go(client, patched, queue)  # records the marker of "prepare-v2"
    v2.kill()
    deploy(shared, sdk, "v3", queue, tmp_path)  # the old "prepare" is gone
    for run in (old, patched):
        client.signal(run, "go")
    parked = client.wait(old, timeout=WAIT).workflow
    completed = client.wait(patched, timeout=WAIT)

    assert parked.status == wf.WORKFLOW_STATUS_PARKED
    assert parked.failure.type == "NonDeterminismError"
    assert "old code path of patch 'prepare-v2', which is deprecated" in parked.failure.message
    assert completed.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert result_of(completed) == {"prepare": "v2", "finish": "v2"}
    assert markers(client, patched) == [("prepare-v2", 0), ("finish-v2", 2)]


def test_a_step_begun_on_the_old_code_keeps_its_path_after_a_kill(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    """The worker is killed inside the old step: the new code, reaching the patch where the
    journal shows that step begun and never finished, keeps it (run again: its lost attempt
    counts), rather than switching to the new step after the old one may have had effects."""
    gate = tmp_path / "gate"
    first = deploy(shared, "python", "v1", "mid-step", tmp_path)
    client.start_workflow("gated_release", str(gate), workflow_id="mid-step", task_queue="mid-step")
    wait_until(Path(f"{gate}.started").exists, WAIT, "the old step to start")
    first.kill()
    gate.touch()
    deploy(shared, "python", "v2", "mid-step", tmp_path)
    finished = client.wait("mid-step", timeout=WAIT)

    assert finished.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert result_of(finished) == {"prepare": "v1"}
    assert [(s.step_id, s.attempts) for s in finished.steps] == [("prepare", 2)]
    assert markers(client, "mid-step") == []


def test_record_patch_is_validated_fenced_and_recorded_once(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    deploy(shared, "python", "v1", "by-hand", tmp_path).kill()  # "release" stays known
    client.start_workflow("release", workflow_id="by-hand", task_queue="by-hand")

    def patch(fence: int, patch_id: str, position: int) -> jpb.RecordPatchRequest:
        return jpb.RecordPatchRequest(
            workflow_id="by-hand", fence=fence, patch_id=patch_id, position=position
        )

    with grpc.insecure_channel(shared.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="by-hand", fence=5), timeout=30)
        for request, field in (
            (patch(5, "", 0), "patch_id"),
            (patch(5, "x" * 201, 0), "patch_id"),
            (patch(5, "v2", -1), "position"),
            (patch(0, "v2", 0), "fence"),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                journal.RecordPatch(request, timeout=30)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in str(caught.value.details())
        first = journal.RecordPatch(patch(5, "v2", 0), timeout=30)
        # The step at the marker's position takes it; sent again, it is answered as the first.
        output = to_payload("prepared")
        step = jpb.RecordStepRequest(
            workflow_id="by-hand",
            fence=5,
            step_id="prepare_v2",
            step_name="prepare_v2",
            position=0,
            attempt=1,
            output=output,
        )
        recorded = journal.RecordStep(step, timeout=30)
        assert journal.RecordStep(step, timeout=30).event_id == recorded.event_id
        # The same patch again, at any position and on a session: the first marker's answer.
        again = journal.RecordPatch(patch(5, "v2", 1), timeout=30)
        session = jpb.SessionRequest(calls=[jpb.JournalCall(id=1, record_patch=patch(5, "v2", 2))])
        [answer] = next(journal.Session(iter([session]), timeout=30)).answers
        with pytest.raises(grpc.RpcError) as caught:
            journal.RecordPatch(patch(4, "v3", 1), timeout=30)
        assert error_reason(caught.value) == "STALE_FENCE"

    assert (first.event_id, recorded.event_id) == (2, 3)
    assert again.event_id == answer.record_patch.event_id == first.event_id
    events = list(client.history("by-hand"))
    assert [(e.event_type, e.name, e.position) for e in events[1:]] == [
        (wf.EVENT_TYPE_PATCH_RECORDED, "v2", 0),
        (wf.EVENT_TYPE_STEP_COMPLETED, "", 0),
    ]
