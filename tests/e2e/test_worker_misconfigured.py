"""Workers that cannot serve as configured say why and exit non-zero at once (no key, a key of
another role, a revoked key, an address that does not resolve), in both SDKs; a scheduler that
cannot be reached is retried, each attempt logged with its cause."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from tests.fixtures.cluster import (
    Cluster,
    Process,
    free_port,
    require_node,
    spawn,
    wait_connected,
    wait_until,
    worker_args,
)
from tests.fixtures.keys import make_key
from tests.fixtures.postgres import Databases

EXIT_WAIT = 30.0
# A name that never resolves (RFC 6761 reserves .invalid).
NOWHERE = "scheduler.perdure.invalid:7402"


@pytest.fixture(scope="module")
def secured(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster with keys on and no worker."""
    workdir: Path = tmp_path_factory.mktemp("misconfigured")
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, workdir, env_overrides={"PERDURE_AUTH": "on"})
        try:
            cluster.start_services()
            yield cluster
        finally:
            cluster.stop()


def python_worker(cluster: Cluster, name: str, **env: str) -> Process:
    """`perdure worker` for tests.e2e.workflows, with `env` over the cluster's (no key)."""
    args = worker_args(name, "tests.e2e.workflows", 2, "default")
    return spawn(name, args, {**cluster.env(), **env}, cluster.workdir / f"{name}.log")


def node_worker(cluster: Cluster, name: str, **env: str) -> Process:
    """tests/e2e/node_worker.mjs (the Node.js SDK), with `env` over the cluster's (no key)."""
    args = [
        "tests/e2e/node_worker.mjs",
        "--scheduler",
        env.pop("PERDURE_SCHEDULER_ADDRESS", cluster.target("scheduler")),
        "--history",
        cluster.target("history"),
        "--identity",
        name,
    ]
    log = cluster.workdir / f"{name}.log"
    return spawn(name, args, {**cluster.env(), **env}, log, program=require_node())


START = {"python": python_worker, "node": node_worker}


def exit_of(process: Process) -> tuple[int, str]:
    """The exit code and output of a worker that must stop by itself."""
    try:
        code = process.popen.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"{process.name} is still running: {process.output()}")
    return code, process.output()


# What each misconfiguration is, as the worker's settings, and what its message must name.
MISCONFIGURED: dict[str, tuple[Callable[[Cluster], dict[str, str]], tuple[str, ...]]] = {
    "keyless": (lambda cluster: {}, ("UNAUTHENTICATED", "PERDURE_API_KEY")),
    "reader": (
        lambda cluster: {"PERDURE_API_KEY": make_key(cluster, "default", "reader")},
        ("PERMISSION_DENIED", "worker key"),
    ),
    "nowhere": (
        lambda cluster: {"PERDURE_SCHEDULER_ADDRESS": NOWHERE},
        (f"scheduler address '{NOWHERE}' does not resolve",),
    ),
}


@pytest.mark.parametrize("case", MISCONFIGURED)
@pytest.mark.parametrize("sdk", START)
def test_a_misconfigured_worker_exits_saying_what_to_fix(
    secured: Cluster, sdk: str, case: str
) -> None:
    """No key, a key of another role, a scheduler address that does not resolve."""
    settings, expected = MISCONFIGURED[case]
    code, output = exit_of(START[sdk](secured, f"{sdk}-{case}", **settings(secured)))
    assert code != 0
    for words in expected:
        assert words in output


@pytest.mark.parametrize("sdk", START)
def test_a_revoked_key_stops_its_worker_saying_so(secured: Cluster, sdk: str) -> None:
    worker_key = make_key(secured, "default", "worker", "default")
    admin_key = make_key(secured, "default", "admin")
    worker = START[sdk](secured, f"{sdk}-revoked", PERDURE_API_KEY=worker_key)
    try:
        wait_connected(worker, marker="connected")
        key_id = worker_key.removeprefix("prd_").partition("_")[0]
        with grpc.insecure_channel(secured.gateway) as channel:
            admingrpc.AdminServiceStub(channel).RevokeApiKey(
                admin.RevokeApiKeyRequest(key_id=key_id),
                metadata=(("authorization", f"Bearer {admin_key}"),),
                timeout=10,
            )
        code, output = exit_of(worker)
    finally:
        worker.kill()
    assert code != 0
    assert "UNAUTHENTICATED" in output and "PERDURE_API_KEY" in output


@pytest.mark.parametrize("sdk", START)
def test_an_unreachable_scheduler_is_retried_and_each_attempt_logged(
    secured: Cluster, sdk: str
) -> None:
    silent = f"127.0.0.1:{free_port()}"  # nothing listens there
    worker = START[sdk](secured, f"{sdk}-unreachable", PERDURE_SCHEDULER_ADDRESS=silent)
    try:
        wait_until(
            lambda: "reconnect attempt 3" in worker.output() or worker.popen.poll() is not None,
            EXIT_WAIT,
            "three reconnect attempts",
        )
        assert worker.popen.poll() is None, worker.output()  # still trying: it may come up
    finally:
        worker.kill()
    output = worker.output()
    for attempt in (1, 2, 3):
        assert f"{silent}: stream lost or refused (UNAVAILABLE" in output
        assert f"reconnect attempt {attempt} in" in output


def test_a_worker_made_in_a_program_reads_its_key_from_the_environment(
    secured: Cluster,
) -> None:
    worker_key = make_key(secured, "default", "worker", "default")
    program = (
        "import asyncio, logging\n"
        "from perdure.worker import Worker\n"
        "from tests.e2e.workflows import five_steps\n"
        "logging.basicConfig(level=logging.INFO)\n"
        f"asyncio.run(Worker([five_steps], scheduler={secured.target('scheduler')!r},"
        f" history={secured.target('history')!r}).run())\n"
    )
    env = {**secured.env(), "PERDURE_API_KEY": worker_key}
    worker = spawn("program", ["-c", program], env, secured.workdir / "program.log")
    try:
        wait_connected(worker)  # with keys on: it sent the key it read
    finally:
        worker.kill()
