"""Retention against the real services as processes on a real PostgreSQL, with partitions of
two seconds and a default retention of three: closed runs past their retention go (whole
partitions dropped, or one by one in a partition an open run holds), open runs and runs a
namespace keeps longer stay, payloads stored by content go with the last partition that names
them, and runs started and completed during the passes are never lost."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.client import Client
from perdure.common.auth import bearer_metadata
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key

MODULE = "tests.e2e.retention_workflows"
WAIT = 60.0  # upper bound of any wait for retention to get somewhere
ENV = {
    "PERDURE_PARTITION_SECONDS": "2",
    "PERDURE_RETENTION": "3",
    "PERDURE_PAYLOAD_REF_BYTES": "100",
}


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """Where history archives the closed runs retention deletes (PERDURE_ARCHIVE)."""
    return tmp_path / "archive"


@pytest.fixture
def cluster(start_cluster: Callable[..., Cluster], archive: Path) -> Iterator[Cluster]:
    running = start_cluster(**ENV, PERDURE_ARCHIVE=str(archive))
    running.start_worker("retention", module=MODULE, concurrency=20)
    running.start_worker("keep", module=MODULE, PERDURE_NAMESPACE="keep")
    yield running


def query(cluster: Cluster, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        return list(conn.execute(statement, params).fetchall())


def part_of(cluster: Cluster, run_id: str) -> int:
    rows = query(cluster, "SELECT part FROM history.workflows WHERE run_id = %s", run_id)
    assert rows, f"run {run_id} is gone"
    return int(str(rows[0][0]))


def exists(cluster: Cluster, run_id: str) -> bool:
    return bool(query(cluster, "SELECT 1 FROM history.workflows WHERE run_id = %s", run_id))


def attached(cluster: Cluster) -> set[str]:
    """The partitions of the journal's events table, from the catalog."""
    rows = query(
        cluster,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'history.events'::regclass",
    )
    return {str(row[0]) for row in rows}


def stored(cluster: Cluster, blob: str) -> bool:
    digest = hashlib.sha256(f'"{blob}"'.encode()).digest()
    return bool(query(cluster, "SELECT 1 FROM history.payloads WHERE sha256 = %s", digest))


def next_partition(cluster: Cluster, after: int) -> None:
    """Wait until runs start in a partition after `after`."""
    current = "SELECT history.current_part()"
    wait_until(lambda: int(str(query(cluster, current)[0][0])) > after, WAIT, "a new partition")


def cli(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "perdure.cli",
            "admin",
            "retention",
            *args,
            "--address",
            cluster.gateway,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class Load:
    """Runs started and completed in two threads for as long as the test says."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._stop = threading.Event()
        self.completed: list[str] = []
        self.failures: list[BaseException] = []
        self._threads = [threading.Thread(target=self._run) for _ in range(2)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        with Client(self._cluster.gateway) as client:
            while not self._stop.is_set():
                try:
                    handle = client.start("echo", {"blobs": [uuid.uuid4().hex * 4]})
                    assert handle.result(timeout=WAIT) == 1
                    self.completed.append(handle.run_id)
                except BaseException as error:
                    self.failures.append(error)
                    return

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=WAIT)


def test_retention_drops_expired_partitions_and_keeps_open_and_kept_runs(
    cluster: Cluster, archive: Path
) -> None:
    unique, shared = "u" * 200 + uuid.uuid4().hex, "s" * 200 + uuid.uuid4().hex
    with Client(cluster.gateway) as client, Client(cluster.gateway, namespace="keep") as keep:
        load = Load(cluster)
        try:
            # An open run, and runs closed beside it in its partition.
            waiter = client.start("waits_for_go", {})
            beside = client.start("echo", {"blobs": []})
            assert beside.result(timeout=WAIT) == 0
            held = part_of(cluster, waiter.run_id)
            next_partition(cluster, held)
            # A run with a payload of its own and one it shares with a kept run.
            expired = client.start("echo", {"blobs": [unique, shared]})
            assert expired.result(timeout=WAIT) == 2
            dropped = part_of(cluster, expired.run_id)
            assert stored(cluster, unique) and stored(cluster, shared)
            next_partition(cluster, dropped)
            # A namespace that keeps its runs forever, set through the CLI.
            assert cli(cluster, "set", "keep", "forever") == "keep\tforever\tset"
            assert cli(cluster, "show", "keep") == "keep\tforever\tset"
            assert cli(cluster, "show", "default") == "default\t3s\tdefault"
            kept = keep.start("echo", {"blobs": [shared]})
            assert kept.result(timeout=WAIT) == 1

            # Past their retention: the closed runs go, the partition of the second whole,
            # the first's row by row (the open run holds its partition).
            wait_until(
                lambda: (
                    not exists(cluster, expired.run_id)
                    and not exists(cluster, beside.run_id)
                    and f"events_{dropped}" not in attached(cluster)
                    and not stored(cluster, unique)
                ),
                WAIT,
                "the expired runs deleted and their partition dropped",
            )
            assert exists(cluster, waiter.run_id)
            assert f"events_{held}" in attached(cluster)
            # Each deleted run was archived first, and its archive restores it.
            for gone in (expired, beside):
                assert (archive / "default" / f"{gone.run_id}.perdure-run.gz").is_file()
            restore = [sys.executable, "-m", "perdure.cli", "workflow", "import"]
            imported = subprocess.run(
                [
                    *restore,
                    str(archive / "default" / f"{expired.run_id}.perdure-run.gz"),
                    "--address",
                    cluster.gateway,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert imported.returncode == 0, imported.stderr
            assert client.result(expired.workflow_id, run_id=expired.run_id) == 2
            assert exists(cluster, kept.run_id)
            assert stored(cluster, shared)  # the kept run names it
            assert keep.result(kept.workflow_id, run_id=kept.run_id) == 1

            # The open run goes on after its neighbours are gone; its partition drops once it
            # has closed and is past its retention.
            client.signal(waiter.workflow_id, "go", "went")
            assert waiter.result(timeout=WAIT) == "went"
            wait_until(
                lambda: f"events_{held}" not in attached(cluster), WAIT, "the held one dropped"
            )
        finally:
            load.stop()
    assert not load.failures, load.failures
    assert len(load.completed) > 10
    first = load.completed[0]  # the load's own runs expire too
    wait_until(lambda: not exists(cluster, first), WAIT, "the load's first run deleted")


def test_a_namespace_retention_is_read_by_a_reader_and_set_by_an_admin_audited(
    start_cluster: Callable[..., Cluster],
) -> None:
    secured = start_cluster(PERDURE_AUTH="on", PERDURE_RETENTION="86400")
    reader, owner = make_key(secured, "acme", "reader"), make_key(secured, "acme", "admin")
    with grpc.insecure_channel(secured.gateway) as channel:
        stub = admingrpc.AdminServiceStub(channel)

        def call(method: str, request: Any, token: str) -> Any:
            return getattr(stub, method)(request, timeout=30, metadata=bearer_metadata(token))

        def refused(method: str, request: Any, token: str) -> grpc.StatusCode:
            with pytest.raises(grpc.RpcError) as caught:
                call(method, request, token)
            return caught.value.code()

        shown = call("GetRetention", admin.GetRetentionRequest(), reader).retention
        assert (shown.namespace, shown.seconds, shown.forever, shown.is_default) == (
            "acme",
            86400.0,
            False,
            True,
        )
        week = admin.SetRetentionRequest(seconds=7 * 86400)
        assert refused("SetRetention", week, reader) == grpc.StatusCode.PERMISSION_DENIED
        other = admin.SetRetentionRequest(namespace="other", forever=True)
        assert refused("SetRetention", other, owner) == grpc.StatusCode.PERMISSION_DENIED
        for bad in (
            admin.SetRetentionRequest(seconds=-1),
            admin.SetRetentionRequest(seconds=60, forever=True),
            admin.SetRetentionRequest(),
        ):
            assert refused("SetRetention", bad, owner) == grpc.StatusCode.INVALID_ARGUMENT
        set_to = call("SetRetention", week, owner).retention
        assert (set_to.seconds, set_to.is_default) == (7 * 86400, False)
        shown = call("GetRetention", admin.GetRetentionRequest(), reader).retention
        assert (shown.seconds, shown.is_default) == (7 * 86400, False)
        audit = call("ListAuditEvents", admin.ListAuditEventsRequest(), owner).events
        assert [e.action for e in audit if e.target == "acme"] == ["RETENTION_SET"]

    def cli(token: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "perdure.cli",
                "admin",
                "retention",
                *args,
                "--address",
                secured.gateway,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PERDURE_API_KEY": token},
        )

    assert cli(owner, "set", "acme", "12h").stdout.strip() == "acme\t12h\tset"
    denied = cli(reader, "set", "acme", "forever")
    assert denied.returncode != 0 and "PERMISSION_DENIED" in denied.stderr
    assert cli(reader, "show", "acme").stdout.strip() == "acme\t12h\tset"
    assert cli(owner, "set", "acme", "default").stdout.strip() == "acme\t1d\tdefault"
