"""Resume, reset and fork end to end: a run parked by a deploy that reordered its calls is
resumed once the fix is deployed and completes; a finished run reset to a step runs only that
step and those after it again, even when its worker is killed mid-way; a fork with an
overridden output gets another result while its source stays as it was, and a diff shows
exactly what changed. Then what each call refuses.

One cluster for the module, with one Python worker (replaced when a test kills it) serving
tests/e2e/recovery_workflows.py, its cache of suspended runs off so that every wake-up replays
the code as it is now (as after a deploy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import requests

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.cli.__main__ import main as perdure
from perdure.client import Client
from perdure.common.auth import bearer_metadata
from perdure.worker._payload import from_payload
from tests.e2e.blocking import runs_per_step, started
from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium
from tests.fixtures.cluster import Cluster, Process, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.postgres import Databases
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.recovery_workflows"
WAIT = 90.0  # upper bound of any wait for a run to get somewhere


@dataclass
class Recovering:
    """The module's cluster and its current worker."""

    cluster: Cluster
    worker: Process
    starts: int = 0

    def start_worker(self) -> Process:
        self.starts += 1
        self.worker = self.cluster.start_worker(
            f"recovery-{self.starts}", module=MODULE, PERDURE_WORKER_CACHE_SIZE="0"
        )
        return self.worker


@pytest.fixture(scope="module")
def recovering(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recovering]:
    workdir: Path = tmp_path_factory.mktemp("recovery")
    with databases.fresh() as dsn:
        # A short lease: a killed worker's run goes over to the next one quickly.
        cluster = Cluster(dsn, workdir, env_overrides={"PERDURE_LEASE_TTL": "2"})
        try:
            cluster.start_services()
            recovering = Recovering(cluster, None)  # type: ignore[arg-type]
            recovering.start_worker()
            yield recovering
        finally:
            cluster.stop()


@pytest.fixture
def client(recovering: Recovering) -> Iterator[Client]:
    with recovering.cluster.client() as client:
        yield client


def _adding(client: Client, workflow_id: str, tmp_path: Path, start: int = 0) -> Path:
    """Run `adding` to completion; its ledger."""
    ledger = tmp_path / f"{workflow_id}.ledger"
    params = {"start": start, "ledger": str(ledger), "hold": str(tmp_path / "hold")}
    client.start_workflow("adding", params, workflow_id=workflow_id)
    assert client.wait(workflow_id, timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    return ledger


def _refused(call: object) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    error = raised.value
    return error.code(), error_reason(error), error.details() or ""


def _types(client: Client, workflow_id: str, run_id: str = "") -> list[int]:
    return [e.event_type for e in client.history(workflow_id, run_id=run_id)]


def _park(client: Client, tmp_path: Path, run: str) -> tuple[Path, Path, wf.WorkflowInfo]:
    """Start `drifting_order` and park it with a deploy that reorders its calls: its version
    file, its ledger and the parked run."""
    version, ledger = tmp_path / "version", tmp_path / "ledger"
    version.write_text("v1")
    params = {"version_file": str(version), "ledger": str(ledger)}
    client.start_workflow("drifting_order", params, workflow_id=run)
    wait_until(
        lambda: client.describe(run).workflow.wait.name == "go", WAIT, f"{run} to wait for go"
    )
    version.write_text("reordered")  # the deploy that calls "second" first
    client.signal(run, "go")
    parked = client.wait(run, timeout=WAIT).workflow
    assert parked.status == wf.WORKFLOW_STATUS_PARKED
    assert parked.failure.type == "NonDeterminismError"
    return version, ledger, parked


def test_a_run_parked_by_a_reordering_deploy_is_resumed_with_the_fix(
    recovering: Recovering, client: Client, tmp_path: Path
) -> None:
    run = "drift-1"
    version, ledger, parked = _park(client, tmp_path, run)
    version.write_text("v1")  # the fix is deployed
    assert client.resume(run, "order fixed") == parked.run_id
    done = client.wait(run, timeout=WAIT).workflow

    assert done.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.result) == "1+2"
    assert done.run_id == parked.run_id and not done.HasField("failure")
    assert runs_per_step(ledger) == {"first": 1, "second": 1}  # nothing ran twice
    events = list(client.history(run))
    types = [e.event_type for e in events]
    resumed = types.index(wf.EVENT_TYPE_WORKFLOW_RESUMED)
    assert types[resumed - 1] == wf.EVENT_TYPE_WORKFLOW_PARKED
    assert events[resumed].failure.message == "order fixed"
    assert types[-1] == wf.EVENT_TYPE_WORKFLOW_COMPLETED
    # Closed again: there is nothing to resume.
    code, reason, message = _refused(lambda: client.resume(run))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_NOT_PARKED")
    assert "completed" in message


def test_a_reset_runs_its_step_and_the_rest_again_through_a_worker_crash(
    recovering: Recovering, client: Client, tmp_path: Path
) -> None:
    run = "reset-1"
    ledger = _adding(client, run, tmp_path)
    first = client.describe(run).workflow
    assert from_payload(first.result) == [1, 3, 6, 10]

    hold = tmp_path / "hold"
    hold.touch()  # add_3 waits in the new run until the worker running it is killed
    reset = client.reset(run, step_id="add_3", reason="re-run the last two")
    wait_until(lambda: len(started(ledger, "add_3")) == 2, WAIT, "add_3 to start again")
    killed = recovering.worker
    killed.kill()
    hold.unlink()
    recovering.start_worker()
    done = client.wait(run, timeout=WAIT).workflow

    assert done.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.result) == [1, 3, 6, 10]
    assert done.run_id == reset.run_id != first.run_id
    assert (done.previous_run_id, done.reset_from_run_id) == (first.run_id, first.run_id)
    assert done.copied_up_to_event_id == reset.copied_up_to_event_id > 1
    runs = runs_per_step(ledger)  # add_3: the first run's, then the retry after the kill
    assert (runs["add_1"], runs["add_2"], runs["add_3"], runs["add_4"]) == (1, 1, 2, 2)
    assert started(ledger, "add_3")[1] == str(killed.popen.pid)
    # The new run's journal starts with the old one's events before add_3, as they were.
    old, new = list(client.history(run, run_id=first.run_id)), list(client.history(run))
    copied = reset.copied_up_to_event_id
    assert new[1:copied] == old[1:copied] and new[0].payload == old[0].payload
    assert old[copied].step_id == "add_3" and new[copied].step_id == "add_3"
    # The finished run it copied is left as it was, and names its successor.
    before = client.describe(run, run_id=first.run_id).workflow
    assert before.status == wf.WORKFLOW_STATUS_COMPLETED and before.next_run_id == done.run_id


def test_a_parked_run_is_resumed_from_its_page(
    recovering: Recovering, client: Client, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    run = "drift-ui"
    version, _, _ = _park(client, tmp_path, run)
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"http://{recovering.cluster.http_address}/#/workflows/{run}")
        panel = page.get_by_test_id("resume-panel")
        expect(panel).to_be_visible(timeout=TIMEOUT_MS)
        version.write_text("v1")
        panel.get_by_label("Reason").fill("fixed in the UI")
        panel.get_by_role("button", name="Resume run").click()
        expect(page.get_by_test_id("workflow-status")).to_have_text("Completed", timeout=TIMEOUT_MS)
        expect(page.get_by_test_id("resume-panel")).to_be_hidden()
        # A fork's page names its source.
        client.fork(run, f"{run}-fork")
        page.goto(f"http://{recovering.cluster.http_address}/#/workflows/{run}-fork")
        expect(page.get_by_test_id("workflow-forked-from")).to_contain_text(run)
        assert errors == []
    resumed = [e for e in client.history(run) if e.event_type == wf.EVENT_TYPE_WORKFLOW_RESUMED]
    assert [e.failure.message for e in resumed] == ["fixed in the UI"]


def _cli(capsys: pytest.CaptureFixture[str], address: str, *args: str) -> str:
    with pytest.raises(SystemExit) as exited:
        perdure(["workflow", "--address", address, *args])
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    return out


def test_a_fork_with_an_override_changes_the_result_and_leaves_its_source(
    recovering: Recovering,
    client: Client,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = "fork-source"
    ledger = _adding(client, source, tmp_path, start=10)
    before = client.describe(source)
    history_before = list(client.history(source))
    assert from_payload(before.workflow.result) == [11, 13, 16, 20]
    override = tmp_path / "add_2.json"
    override.write_text('{"not": "a number"}')
    address = recovering.cluster.gateway
    # A step that did not complete before the fork's step cannot be overridden.
    code, reason, message = _refused(
        lambda: client.fork(source, "fork-bad", step_id="add_2", overrides={"add_3": 1})
    )
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "STEP_NOT_IN_JOURNAL")
    assert "'add_3'" in message

    forked = json.loads(
        _cli(
            capsys,
            address,
            "fork",
            source,
            "--new-id",
            "fork-1",
            "--step",
            "add_3",
            "--override",
            "add_2=100",
            "--reason",
            "what if add_2 said 100",
        )
    )
    done = client.wait("fork-1", timeout=WAIT).workflow

    assert done.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(done.result) == [11, 100, 103, 107]
    assert (done.forked_from_workflow_id, done.forked_from_run_id) == (
        source,
        before.workflow.run_id,
    )
    assert done.copied_up_to_event_id == int(forked["copied_up_to_event_id"])
    assert done.run_id == forked["run_id"] and done.run_number == 1
    runs = runs_per_step(ledger) + runs_per_step(tmp_path / "fork-1.ledger")
    assert (runs["add_1"], runs["add_2"], runs["add_3"], runs["add_4"]) == (1, 1, 2, 2)
    # The source is untouched: the same description and journal as before.
    assert client.describe(source) == before
    assert list(client.history(source)) == history_before
    # A diff shows the overridden step and what follows as different, nothing else.
    report = json.loads(_cli(capsys, address, "diff", source, "fork-1", "--json"))
    assert [s["status"] for s in report["steps"]] == ["same", "different", "different", "different"]
    assert [(s["a"], s["b"]) for s in report["steps"][1:]] == [
        ("13", "100"),
        ("16", "103"),
        ("20", "107"),
    ]
    assert report["status"] == {"a": "COMPLETED", "b": "COMPLETED"}
    assert report["result"] == {"a": "[11,13,16,20]", "b": "[11,100,103,107]"}
    text = _cli(capsys, address, "diff", source, source)
    assert "different" not in text
    # A fork of the whole journal replays every step and reaches the same result.
    client.fork(source, "fork-whole", overrides={"add_4": 0})
    whole = client.wait("fork-whole", timeout=WAIT).workflow
    assert from_payload(whole.result) == [11, 13, 16, 0]
    # The fork's id is now taken; the override file is read from disk.
    code, reason, _ = _refused(lambda: client.fork(source, "fork-1"))
    assert (code, reason) == (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT")
    _cli(capsys, address, "fork", source, "--new-id", "fork-2", "--override", f"add_4=@{override}")
    assert from_payload(client.wait("fork-2", timeout=WAIT).workflow.result)[-1] == {
        "not": "a number"
    }


@pytest.fixture(scope="module")
def finished(recovering: Recovering, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A completed run of `adding` for the refusals to name."""
    with recovering.cluster.client() as client:
        _adding(client, "refusals", tmp_path_factory.mktemp("refusals"))
    return "refusals"


# (call, its arguments, status, reason, a text the message must hold)
REFUSALS = [
    ("resume", ("nobody",), {}, "NOT_FOUND", "WORKFLOW_NOT_FOUND", "nobody"),
    ("reset", ("nobody",), {"step_id": "a"}, "NOT_FOUND", "WORKFLOW_NOT_FOUND", "nobody"),
    ("fork", ("nobody", "x"), {}, "NOT_FOUND", "WORKFLOW_NOT_FOUND", "nobody"),
    ("resume", ("$run",), {"run_id": "ghost"}, "NOT_FOUND", "RUN_NOT_FOUND", "ghost"),
    ("resume", ("$run",), {}, "FAILED_PRECONDITION", "WORKFLOW_NOT_PARKED", "completed"),
    ("reset", ("$run",), {"step_id": "nope"}, "INVALID_ARGUMENT", "STEP_NOT_IN_JOURNAL", "nope"),
    ("reset", ("$run",), {"event_id": 999}, "INVALID_ARGUMENT", "STEP_NOT_IN_JOURNAL", "999"),
    ("reset", ("$run",), {}, "INVALID_ARGUMENT", "INVALID_REQUEST", "exactly one"),
    ("reset", ("$run",), {"step_id": "a", "event_id": 3}, "INVALID_ARGUMENT", "", "exactly one"),
    ("fork", ("$run", ""), {}, "INVALID_ARGUMENT", "INVALID_REQUEST", "new_workflow_id"),
    ("fork", ("$run", "@x"), {}, "INVALID_ARGUMENT", "INVALID_REQUEST", "new_workflow_id"),
    (
        "fork",
        ("$run", "y"),
        {"step_id": "add_9"},
        "INVALID_ARGUMENT",
        "STEP_NOT_IN_JOURNAL",
        "add_9",
    ),
    ("fork", ("$run", "$run"), {}, "ALREADY_EXISTS", "WORKFLOW_ID_CONFLICT", "taken"),
]


@pytest.mark.parametrize(("method", "args", "kwargs", "code", "reason", "named"), REFUSALS)
def test_recovery_calls_refuse_what_they_cannot_do(
    finished: str,
    client: Client,
    method: str,
    args: tuple[str, ...],
    kwargs: dict[str, object],
    code: str,
    reason: str,
    named: str,
) -> None:
    named_args = [finished if arg == "$run" else arg for arg in args]
    refused = _refused(lambda: getattr(client, method)(*named_args, **kwargs))
    assert refused[0] == getattr(grpc.StatusCode, code)
    assert refused[1] == (reason or "INVALID_REQUEST")
    assert named in refused[2]


def test_reset_and_fork_over_http_take_exact_json_overrides(
    recovering: Recovering, client: Client, finished: str
) -> None:
    base = f"http://{recovering.cluster.http_address}/v1/workflows/{finished}"
    big = "18446744073709551617"  # 2**64 + 1: read through no float
    body = f'{{"new_workflow_id": "http-fork", "overrides": {{"add_4": {big}}}}}'
    forked = requests.post(f"{base}/fork", data=body, timeout=30)
    assert forked.status_code == 200, forked.text
    assert forked.json()["workflow_id"] == "http-fork"
    done = client.wait("http-fork", timeout=WAIT).workflow
    assert done.result.data.decode().endswith(f",{big}]")
    refused = requests.post(f"{base}/reset", json={"step_id": "nope"}, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["error"]["reason"] == "STEP_NOT_IN_JOURNAL"
    refused = requests.post(f"{base}/resume", json={"reason": "why not"}, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["error"]["reason"] == "WORKFLOW_NOT_PARKED"


def test_only_an_operator_resumes_resets_and_forks_and_each_is_audited(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    secured = start_cluster(PERDURE_AUTH="on")
    reader = make_key(secured, "default", "reader")
    operator = make_key(secured, "default", "operator")
    admin_key = make_key(secured, "default", "admin")
    worker_key = make_key(secured, "default", "worker", "*")
    secured.start_worker("keyed", module=MODULE, PERDURE_API_KEY=worker_key)
    with Client(secured.gateway, api_key=operator) as client:
        ledger = _adding(client, "keyed", tmp_path)
        with Client(secured.gateway, api_key=reader) as read_only:
            for call in (
                lambda: read_only.resume("keyed"),
                lambda: read_only.reset("keyed", step_id="add_2"),
                lambda: read_only.fork("keyed", "keyed-fork"),
            ):
                code, _, message = _refused(call)
                assert (
                    code == grpc.StatusCode.PERMISSION_DENIED and "needs role operator" in message
                )
        client.fork("keyed", "keyed-fork", step_id="add_4", reason="try")
        client.reset("keyed", step_id="add_4", reason="again")
        assert client.wait("keyed", timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        assert client.wait("keyed-fork", timeout=WAIT).workflow.status == (
            wf.WORKFLOW_STATUS_COMPLETED
        )
    assert runs_per_step(ledger)["add_4"] == 3  # the first run, the fork and the reset
    with grpc.insecure_channel(secured.gateway) as channel:
        audit = admingrpc.AdminServiceStub(channel).ListAuditEvents(
            admin.ListAuditEventsRequest(), metadata=bearer_metadata(admin_key), timeout=30
        )
    operator_id = operator.split("_")[1]
    actions = [(e.action, e.target, e.key_id, e.details["reason"]) for e in audit.events[:2]]
    assert actions == [
        ("WORKFLOW_RESET", "keyed", operator_id, "again"),
        ("WORKFLOW_FORKED", "keyed", operator_id, "try"),
    ]
