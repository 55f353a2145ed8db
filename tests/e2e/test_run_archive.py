"""Runs exported from one cluster and imported into another (two databases), and the archive
writer's files imported the same way: the imported run reads back exactly as the original
(describe and history, every field), through the CLI and the HTTP API; an import is all or
nothing, refused twice, refused for an open run and for a changed file. And `perdure admin
storage`, which reads the same runs' sizes.

Two clusters for the module, each on a database of its own; one worker on the first.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
import requests

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client, WorkflowNotFoundError
from perdure.history.archive import ArchiveTarget, archive_runs
from tests.fixtures.cluster import Cluster, free_port, wait_until
from tests.fixtures.postgres import Databases
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.archive_workflows"
WAIT = 60.0


@pytest.fixture(scope="module")
def clusters(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, Cluster]]:
    """The source (with a worker) and the target, on databases of their own."""
    with databases.fresh() as source_dsn, databases.fresh() as target_dsn:
        source = Cluster(
            source_dsn,
            tmp_path_factory.mktemp("source"),
            env_overrides={"PERDURE_STORAGE_SAMPLE_INTERVAL": "0.5"},
        )
        target = Cluster(target_dsn, tmp_path_factory.mktemp("target"))
        try:
            source.start_services()
            target.start_services()
            source.start_worker("main", module=MODULE)
            yield source, target
        finally:
            source.stop()
            target.stop()


def _closed(client: Client, workflow_id: str, decision: str) -> wf.WorkflowInfo:
    """A run through both signals (the note sent twice with its id) to its close."""
    client.start_workflow("archived_order", {"qty": 7}, workflow_id=workflow_id)
    assert client.signal(workflow_id, "note", {"by": "ops"}, signal_id="n1")
    assert not client.signal(workflow_id, "note", {"by": "ops"}, signal_id="n1")
    client.signal(workflow_id, "decide", decision)
    return client.wait(workflow_id, timeout=WAIT).workflow


def _cli(cluster: Cluster, *args: str, namespace: str = "") -> subprocess.CompletedProcess[str]:
    flags = ["--address", cluster.gateway] + (["--namespace", namespace] if namespace else [])
    return subprocess.run(
        [sys.executable, "-m", "perdure.cli", "workflow", *args, *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _import(cluster: Cluster, archive: bytes, namespace: str = "") -> admin.ImportWorkflowResponse:
    with grpc.insecure_channel(cluster.gateway) as channel:
        request = admin.ImportWorkflowRequest(namespace=namespace, archive=archive)
        answer: admin.ImportWorkflowResponse = admingrpc.AdminServiceStub(channel).ImportWorkflow(
            request, timeout=60
        )
        return answer


def _refused(cluster: Cluster, archive: bytes, namespace: str = "") -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        _import(cluster, archive, namespace)
    return refused.value


def _same_run(source: Client, target: Client, workflow_id: str, run_id: str = "") -> None:
    """Describe and history read the same from both clusters, every field."""
    original = source.describe(workflow_id, run_id=run_id)
    imported = target.describe(workflow_id, run_id=run_id)
    if target.namespace:  # the one field that must differ: the namespace it went into
        assert imported.workflow.namespace == target.namespace
        imported.workflow.namespace = original.workflow.namespace
    assert imported == original
    assert list(target.history(workflow_id, run_id=run_id)) == list(
        source.history(workflow_id, run_id=run_id)
    )


def test_a_closed_run_exported_and_imported_reads_back_exactly(
    clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    source, target = clusters
    with source.client() as client:
        failed = _closed(client, "order-failed", "decline")
    assert failed.status == wf.WORKFLOW_STATUS_FAILED
    assert failed.history_bytes > 40_000  # the large label counts, stored by content or not

    file = tmp_path / "order.perdure-run.gz"
    exported = _cli(source, "export", "order-failed", "-o", str(file))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in gzip.decompress(file.read_bytes()).splitlines()]
    assert lines[0]["format"] == "perdure-run" and lines[0]["version"] == 1
    assert len(lines) == failed.event_count + 2  # the run, each event, the trailer
    assert any(line.get("payload_data") for line in lines[1:-1])  # the label travels inline

    imported = _cli(target, "import", str(file))
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {
        "workflow_id": "order-failed",
        "run_id": failed.run_id,
        "event_count": failed.event_count,
        "earlier_run": False,
    }
    with source.client() as original, target.client() as copy:
        _same_run(original, copy, "order-failed")

    # The CLI and the HTTP API show it, its size with it (int64 as a string).
    described = _cli(target, "describe", "order-failed")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["workflow"]["status"] == "WORKFLOW_STATUS_FAILED"
    shown = requests.get(f"http://{target.http_address}/v1/workflows/order-failed", timeout=30)
    assert shown.json()["workflow"]["history_bytes"] == str(failed.history_bytes)

    # Twice: the id is taken.
    again = _refused(target, file.read_bytes())
    assert again.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_reason(again) == "WORKFLOW_ID_CONFLICT"


def _tampered(
    archive: bytes, line: int, change: dict[str, object], *, reseal: bool = False
) -> bytes:
    """The archive with an event line changed; `reseal`: its trailer's digest made again to
    match, as a deliberate edit would (the values themselves are then what is refused)."""
    lines = gzip.decompress(archive).splitlines()
    value = json.loads(lines[line - 1])
    value["event"].update(change)
    for column in [c for c, v in change.items() if v is None]:
        del value["event"][column]
    lines[line - 1] = json.dumps(value).encode()
    if reseal:
        trailer = json.loads(lines[-1])
        trailer["end"]["sha256"] = hashlib.sha256(
            b"".join(x + b"\n" for x in lines[:-1])
        ).hexdigest()
        lines[-1] = json.dumps(trailer).encode()
    return gzip.compress(b"\n".join(lines) + b"\n")


def test_a_changed_or_broken_archive_is_refused_and_nothing_is_written(
    clusters: tuple[Cluster, Cluster],
) -> None:
    source, target = clusters
    with source.client() as client:
        _closed(client, "order-tampered", "approve")
    with grpc.insecure_channel(source.gateway) as channel:
        archive = (
            admingrpc.AdminServiceStub(channel)
            .ExportWorkflow(admin.ExportWorkflowRequest(workflow_id="order-tampered"), timeout=60)
            .archive
        )
    changed = _tampered(archive, 3, {"step_name": "priced"})  # the digest no longer matches
    broken = _tampered(archive, 4, {"created_at": "not a time"}, reseal=True)
    lacking = _tampered(archive, 5, {"usage": None}, reseal=True)
    cut = gzip.compress(b"\n".join(gzip.decompress(archive).splitlines()[:-2]) + b"\n")
    for bad, words in (
        (changed, "do not match its sha256"),
        (broken, "archive line 4: the database refused a value"),
        (lacking, "archive line 5: event lacks ['usage']"),
        (cut, "trailer"),
        (archive[: len(archive) // 2], "gzip"),
        (b"not an archive", "gzip"),
    ):
        refused = _refused(target, bad)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
        assert words in (refused.details() or ""), refused.details()
    with target.client() as copy, pytest.raises(WorkflowNotFoundError):
        copy.describe("order-tampered")
    with Client(target.gateway, namespace="restored") as copy:
        # The unchanged file goes in, here into another namespace: the same run, its
        # namespace the only difference. (A run id is unique in a database: a run is
        # imported into one namespace of it.)
        assert _import(target, archive, "restored").event_count > 0
        with source.client() as original:
            _same_run(original, copy, "order-tampered")


def test_an_open_run_exports_but_is_not_imported(clusters: tuple[Cluster, Cluster]) -> None:
    source, target = clusters
    with source.client() as client:
        client.start_workflow("archived_order", {"qty": 1}, workflow_id="order-open")
        wait_until(
            lambda: client.describe("order-open").workflow.status == wf.WORKFLOW_STATUS_WAITING,
            WAIT,
            "the run to wait for its note",
        )
    with grpc.insecure_channel(source.gateway) as channel:
        stub = admingrpc.AdminServiceStub(channel)
        archive = stub.ExportWorkflow(
            admin.ExportWorkflowRequest(workflow_id="order-open"), timeout=60
        ).archive
        with pytest.raises(grpc.RpcError) as missing:
            stub.ExportWorkflow(admin.ExportWorkflowRequest(workflow_id="no-such"), timeout=60)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    refused = _refused(target, archive)
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(refused) == "WORKFLOW_OPEN"
    assert "only a closed run" in (refused.details() or "")


async def _archive_to(dsn: str, keys: list[str], target: ArchiveTarget) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await archive_runs(conn, keys, target)


def test_the_archive_writer_writes_runs_that_import_exactly(
    clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    source, target = clusters
    with source.client() as client:
        first = _closed(client, "order-archived", "approve")
        # The id reused: the first run becomes an earlier run of the chain ('@~<run id>').
        client.start_workflow(
            "archived_order",
            {"qty": 2},
            workflow_id="order-archived",
            id_reuse_policy=api.ID_REUSE_POLICY_ALLOW,
        )
        client.signal("order-archived", "note", "second")
        client.signal("order-archived", "decide", "decline")
        second = client.wait("order-archived", timeout=WAIT).workflow
    assert second.previous_run_id == first.run_id
    keys = ["order-archived", f"@~{first.run_id}"]
    directory = tmp_path / "archive"
    asyncio.run(_archive_to(source.dsn, keys, ArchiveTarget(directory)))
    # Again, as after a crash: each file replaced, none duplicated.
    asyncio.run(_archive_to(source.dsn, keys, ArchiveTarget(directory)))
    files = sorted((directory / "default").iterdir())
    assert [f.name for f in files] == sorted(
        f"{run.run_id}.perdure-run.gz" for run in (first, second)
    )
    assert not list(directory.glob("**/.*.tmp"))

    # The latest run first, then the earlier one, placed before it in its chain.
    latest = _cli(target, "import", str(directory / "default" / f"{second.run_id}.perdure-run.gz"))
    assert latest.returncode == 0, latest.stderr
    earlier = (directory / "default" / f"{first.run_id}.perdure-run.gz").read_bytes()
    assert _import(target, earlier).earlier_run
    with source.client() as original, target.client() as copy:
        _same_run(original, copy, "order-archived")
        _same_run(original, copy, "order-archived", run_id=first.run_id)


def _storage(cluster: Cluster, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "perdure.cli", "admin", "storage"]
    return subprocess.run(
        [*command, "--address", cluster.gateway, *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_admin_storage_shows_the_namespace_the_largest_runs_and_the_database(
    clusters: tuple[Cluster, Cluster],
) -> None:
    source, _ = clusters
    with source.client() as client:
        _closed(client, "order-measured-1", "decline")
        closed = _closed(client, "order-measured", "approve")
        runs = client.list(page_size=1000).workflows

    with grpc.insecure_channel(source.gateway) as channel:
        stub = admingrpc.AdminServiceStub(channel)

        def growth_known() -> bool:
            answer = stub.GetStorage(admin.GetStorageRequest(), timeout=60)
            return bool(answer.write_rate.window_seconds > 0)

        wait_until(growth_known, WAIT, "two storage samples", interval=0.2)
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetStorage(admin.GetStorageRequest(top=101), timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "top must be between 0 and 100" in (refused.value.details() or "")
    answer = _storage(source, "--json", "--top", "2")
    assert answer.returncode == 0, answer.stderr
    shown = json.loads(answer.stdout)
    namespace = shown["namespace"]
    assert namespace["namespace"] == "default"
    assert int(namespace["runs"]) >= len(runs) and int(namespace["events"]) >= closed.event_count
    assert int(namespace["history_bytes"]) >= closed.history_bytes
    assert int(namespace["steps"]) >= 3  # price, label, charge
    largest = shown["largest_runs"]
    assert len(largest) == 2
    assert int(largest[0]["history_bytes"]) >= int(largest[1]["history_bytes"]) > 40_000
    assert int(shown["database_bytes"]) > 0
    tables = {t["name"]: t for t in shown["tables"]}
    assert {"history.events", "history.workflows", "scheduler.tasks"} <= set(tables)
    assert tables["history.events"]["dead_share_source"] in ("estimate", "pgstattuple")

    over_http = requests.get(f"http://{source.http_address}/v1/storage?top=1", timeout=60)
    assert over_http.status_code == 200, over_http.text
    assert len(over_http.json()["largest_runs"]) == 1

    text = _storage(source)
    assert text.returncode == 0, text.stderr
    for heading in ("NAMESPACE default", "JOURNAL GROWTH", "LARGEST RUNS", "DATABASE"):
        assert heading in text.stdout
    assert "kB" in text.stdout and "history.events" in text.stdout


@pytest.fixture
def s3_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local S3-compatible endpoint (moto's server), boto3 pointed at it."""
    port = free_port()
    log = tmp_path / "s3.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-p", str(port)], stdout=out, stderr=out
        )
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    try:
        wait_until(lambda: _answers(endpoint), WAIT, "the S3 endpoint")
        yield endpoint
    finally:
        server.kill()
        server.wait()


def _answers(endpoint: str) -> bool:
    try:
        requests.get(endpoint, timeout=1)
    except requests.ConnectionError:
        return False
    return True


def test_the_archive_writer_puts_runs_in_an_s3_bucket(
    clusters: tuple[Cluster, Cluster], s3_endpoint: str
) -> None:
    boto3 = pytest.importorskip("boto3")
    source, target = clusters
    with source.client() as client:
        run = _closed(client, "order-in-s3", "approve")
    bucket = boto3.client("s3")
    bucket.create_bucket(Bucket="runs")
    archive = ArchiveTarget.parse("s3://runs/perdure")
    asyncio.run(_archive_to(source.dsn, ["order-in-s3"], archive))
    asyncio.run(_archive_to(source.dsn, ["order-in-s3"], archive))  # again: the same object
    listed = bucket.list_objects_v2(Bucket="runs")["Contents"]
    assert [o["Key"] for o in listed] == [f"perdure/default/{run.run_id}.perdure-run.gz"]
    data = bucket.get_object(Bucket="runs", Key=listed[0]["Key"])["Body"].read()
    assert _import(target, data, "from-s3").run_id == run.run_id
    with source.client() as original, Client(target.gateway, namespace="from-s3") as copy:
        _same_run(original, copy, "order-in-s3")
