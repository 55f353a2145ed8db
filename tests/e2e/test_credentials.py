"""Credentials over time and under abuse: a revoked key loses the streams it holds open within
seconds, and a flood of made-up tokens costs history's database almost nothing."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import psycopg
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.common.guard import FAILURE_BURST, FAILURES_PER_SECOND
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key

REFUSED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED}
# Revocation reaches open streams within about a second; this is only a test's patience.
REVOCATION_PATIENCE = 10.0


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def made_up_token() -> str:
    """A token of the right shape whose key does not exist: only the database can tell."""
    return f"prd_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"


@pytest.fixture
def secured(start_cluster: Callable[..., Cluster]) -> Cluster:
    return start_cluster(PERDURE_AUTH="on")


class OpenStream:
    """A stream kept open from this side (nothing more is sent) until the server ends it;
    records how and when."""

    def __init__(
        self, open_call: Callable[[Callable[[object], Iterator[object]]], Iterator[object]]
    ) -> None:
        self._stop = threading.Event()
        self.ended_at: float | None = None
        self.error: grpc.RpcError | None = None
        self.first = threading.Event()
        self._call = open_call
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _requests(self, first: object) -> Iterator[object]:
        yield first
        self._stop.wait()

    def _run(self) -> None:
        try:
            for _ in self._call(self._requests):
                self.first.set()
        except grpc.RpcError as error:
            self.error = error
        self.ended_at = time.monotonic()
        self.first.set()

    def close(self) -> None:
        self._stop.set()


def revoke(cluster: Cluster, admin_key: str, key_id: str) -> float:
    """Revoke through the gateway; when the revocation was acknowledged."""
    with grpc.insecure_channel(cluster.gateway) as channel:
        admingrpc.AdminServiceStub(channel).RevokeApiKey(
            admin.RevokeApiKeyRequest(key_id=key_id), metadata=bearer(admin_key), timeout=10
        )
    return time.monotonic()


def key_id(token: str) -> str:
    return token.removeprefix("prd_").partition("_")[0]


def test_revoking_a_worker_key_ends_its_open_task_and_journal_streams(secured: Cluster) -> None:
    worker_key = make_key(secured, "default", "worker", "default")
    admin_key = make_key(secured, "default", "admin")
    hello = tpb.ConnectRequest(
        hello=tpb.Hello(identity="revoked", task_queue="default", workflow_types=["x"], capacity=1)
    )
    tasks_channel = grpc.insecure_channel(secured.address("scheduler"))
    journal_channel = grpc.insecure_channel(secured.address("history"))
    # Two task streams of one key (a fleet's workers): they share the key's checks.
    tasks, more_tasks = (
        OpenStream(
            lambda requests: tgrpc.TaskServiceStub(tasks_channel).Connect(
                requests(hello), metadata=bearer(worker_key)
            )
        )
        for _ in range(2)
    )
    # An unknown run: the answer is an error inside the stream, and the stream stays open.
    probe = jpb.JournalCall(id=1, load_journal=jpb.LoadJournalRequest(workflow_id="none", fence=1))
    journal = OpenStream(
        lambda requests: jgrpc.JournalServiceStub(journal_channel).Session(
            requests(jpb.SessionRequest(calls=[probe])), metadata=bearer(worker_key)
        )
    )
    streams = (tasks, more_tasks, journal)
    try:
        assert all(stream.first.wait(30) for stream in streams)
        assert all(stream.ended_at is None for stream in streams), [s.error for s in streams]
        time.sleep(1.5)  # every stream has been checked again since it opened, and lives
        assert all(stream.ended_at is None for stream in streams)
        revoked_at = revoke(secured, admin_key, key_id(worker_key))
        wait_until(
            lambda: all(stream.ended_at is not None for stream in streams),
            REVOCATION_PATIENCE,
            "every stream of the revoked key to end",
        )
        for stream in streams:
            assert (
                stream.error is not None and stream.error.code() == grpc.StatusCode.UNAUTHENTICATED
            )
            assert "revoked" in (stream.error.details() or "")
            assert (
                stream.ended_at is not None and stream.ended_at - revoked_at < REVOCATION_PATIENCE
            )
    finally:
        for stream in streams:
            stream.close()
        tasks_channel.close()
        journal_channel.close()


def api_key_lookups(cluster: Cluster) -> int:
    """How often history has read its key table so far (PostgreSQL's statistics, which each
    connection reports within about a second of going idle)."""
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT seq_scan + COALESCE(idx_scan, 0) FROM pg_stat_user_tables"
            " WHERE schemaname = 'history' AND relname = 'api_keys'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def settled_lookups(cluster: Cluster) -> int:
    """The lookup count once it stops moving (statistics arrive a little after the reads)."""
    previous = -1
    while True:
        current = api_key_lookups(cluster)
        if current == previous:
            return current
        previous = current
        time.sleep(2.5)


def flood(call: Callable[[str], object], tokens: list[str]) -> list[grpc.StatusCode]:
    """One call per token; the status of each (all must be refusals)."""
    codes = []
    for token in tokens:
        try:
            call(token)
        except grpc.RpcError as error:
            codes.append(error.code())
        else:
            codes.append(grpc.StatusCode.OK)
    return codes


def test_a_flood_of_made_up_tokens_costs_the_database_a_small_constant(
    secured: Cluster,
) -> None:
    operator = make_key(secured, "default", "operator")
    with (
        grpc.insecure_channel(secured.gateway) as gateway,
        grpc.insecure_channel(secured.address("history")) as history,
        grpc.insecure_channel(secured.address("scheduler")) as scheduler,
    ):
        workflows = apigrpc.WorkflowServiceStub(gateway)
        journal = jgrpc.JournalServiceStub(history)
        tasks = tgrpc.TaskServiceStub(scheduler)
        listing = api.ListWorkflowsRequest()
        workflows.ListWorkflows(listing, metadata=bearer(operator), timeout=10)
        before = settled_lookups(secured)
        load = jpb.LoadJournalRequest(workflow_id="@default/x", fence=1)
        hello = tpb.ConnectRequest(
            hello=tpb.Hello(identity="f", task_queue="default", workflow_types=["x"], capacity=1)
        )
        edges: list[Callable[[str], object]] = [
            lambda t: workflows.ListWorkflows(listing, metadata=bearer(t), timeout=10),
            lambda t: journal.LoadJournal(load, metadata=bearer(t), timeout=10),
            lambda t: list(tasks.Connect(iter([hello]), metadata=bearer(t), timeout=10)),
        ]
        per_edge = 400
        started = time.monotonic()
        codes: list[grpc.StatusCode] = []
        for edge in edges:
            codes += flood(edge, [made_up_token() for _ in range(per_edge)])  # all different
            codes += flood(edge, [made_up_token()] * per_edge)  # one, over and over
        elapsed = time.monotonic() - started
        assert set(codes) <= REFUSED, set(codes)
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes  # the address was held back
        # A real key from the same address works again once the flood stops.
        wait_until(
            lambda: (
                flood(
                    lambda t: workflows.ListWorkflows(listing, metadata=bearer(t), timeout=10),
                    [operator],
                )
                == [grpc.StatusCode.OK]
            ),
            30,
            "the operator's key to be accepted again",
        )
    lookups = settled_lookups(secured) - before
    # Each edge looks up at most its burst plus its rate over the flood, plus one per repeated
    # token; without those limits this would be every one of the calls.
    bound = len(edges) * (FAILURE_BURST + FAILURES_PER_SECOND * elapsed + 1) + 5
    assert lookups <= bound, (lookups, bound, elapsed)
    assert lookups < len(codes) / 4
    # Refusals are logged as sums now and then, not once per call.
    for service in ("gateway", "history", "scheduler"):
        log = next(p for p in secured.processes if p.name == service).output()
        assert log.count("bad credentials") <= elapsed / 10 + 2, service
