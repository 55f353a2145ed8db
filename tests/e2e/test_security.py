"""API keys, roles and namespaces on a cluster with authentication on (the default), limits on
messages, payloads, call rates and streams: real services, real gRPC, real keys."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import Client
from perdure.common.auth import bearer_metadata
from perdure.telemetry.rpc import MAX_MESSAGE_BYTES
from perdure.worker._payload import from_payload, to_payload
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.rpc import error_reason


def refused(call: Callable[..., Any], request: Any, **kwargs: Any) -> grpc.RpcError:
    """Make a call that must fail; return its error."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30, **kwargs)
    return caught.value


@pytest.fixture
def secured(start_cluster: Callable[..., Cluster]) -> Cluster:
    """A cluster with API keys required."""
    return start_cluster(PERDURE_AUTH="on")


def test_a_namespace_sees_and_reaches_nothing_of_another(secured: Cluster, tmp_path: Path) -> None:
    keys = {ns: make_key(secured, ns, "operator") for ns in ("alpha", "beta")}
    for ns in ("alpha", "beta"):
        secured.start_worker(f"w-{ns}", PERDURE_API_KEY=make_key(secured, ns, "worker", "*"))
    alpha = Client(secured.gateway, api_key=keys["alpha"])
    beta = Client(secured.gateway, api_key=keys["beta"])
    # The same id in two namespaces is two runs, each run by its own namespace's worker.
    for ns, client in (("alpha", alpha), ("beta", beta)):
        client.start_workflow("five_steps", {"ledger": str(tmp_path / ns)}, workflow_id="same")
    for ns, client in (("alpha", alpha), ("beta", beta)):
        result = from_payload(client.wait("same", timeout=60).workflow.result)
        assert result == {"total": 150, "key": f"@{ns}/same"}
    described = alpha.describe("same").workflow
    assert (described.namespace, described.workflow_id) == ("alpha", "same")

    beta.start_workflow("five_steps", {"ledger": str(tmp_path / "b2")}, workflow_id="beta-only")
    for attempt in (
        lambda: alpha.describe("beta-only"),
        lambda: alpha.signal("beta-only", "go"),
        lambda: alpha.cancel("beta-only"),
        lambda: alpha.terminate("beta-only"),
        lambda: list(alpha.history("beta-only")),
        lambda: alpha.query("beta-only", "anything"),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            attempt()
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value.details()
    assert [w.workflow_id for w in alpha.list().workflows] == ["same"]
    # Naming the other namespace outright is refused, as is a qualified id.
    alpha_in_beta = Client(secured.gateway, api_key=keys["alpha"], namespace="beta")
    with pytest.raises(grpc.RpcError) as caught:
        alpha_in_beta.list()
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "belongs to namespace 'alpha'" in str(caught.value.details())
    with pytest.raises(grpc.RpcError) as caught:
        alpha.describe("@beta/beta-only")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    beta.wait("beta-only", timeout=60)


def test_workers_take_only_their_namespace_and_queues(secured: Cluster, tmp_path: Path) -> None:
    alpha_worker = make_key(secured, "alpha", "worker", "jobs")
    beta_operator = make_key(secured, "beta", "operator")
    secured.start_worker("w-alpha", task_queue="jobs", PERDURE_API_KEY=alpha_worker)
    # alpha's worker serves "jobs" in alpha only: in beta no worker has declared the type.
    with (
        Client(secured.gateway, api_key=beta_operator) as beta,
        pytest.raises(grpc.RpcError) as caught,
    ):
        beta.start_workflow("five_steps", {"ledger": "x"}, workflow_id="b", task_queue="jobs")
    assert error_reason(caught.value) == "WORKFLOW_TYPE_NOT_REGISTERED"

    with grpc.insecure_channel(secured.address("scheduler")) as channel:
        stub = tgrpc.TaskServiceStub(channel)

        def hello(token: str, **fields: Any) -> grpc.RpcError:
            message = tpb.ConnectRequest(
                hello=tpb.Hello(workflow_types=["five_steps"], capacity=1, **fields)
            )
            with pytest.raises(grpc.RpcError) as caught:
                for _ in stub.Connect(iter([message]), metadata=bearer_metadata(token), timeout=30):
                    pass
            return caught.value

        other_namespace = hello(alpha_worker, task_queue="jobs", namespace="beta")
        other_queue = hello(alpha_worker, task_queue="payments")
        no_key = hello("", task_queue="jobs")
        operator_key = hello(beta_operator, task_queue="jobs")
    assert other_namespace.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "cannot serve namespace 'beta'" in str(other_namespace.details())
    assert other_queue.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "may serve task queues jobs; not 'payments'" in str(other_queue.details())
    assert no_key.code() == grpc.StatusCode.UNAUTHENTICATED
    assert operator_key.code() == grpc.StatusCode.PERMISSION_DENIED

    # A worker key cannot touch another namespace's journal, whatever fence it claims.
    with Client(secured.gateway, api_key=make_key(secured, "beta", "operator")) as beta:
        secured.start_worker("w-beta", PERDURE_API_KEY=make_key(secured, "beta", "worker", "*"))
        beta.start_workflow("five_steps", {"ledger": str(tmp_path / "b")}, workflow_id="b1")
        beta.wait("b1", timeout=60)
    with grpc.insecure_channel(secured.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        error = refused(
            journal.LoadJournal,
            jpb.LoadJournalRequest(workflow_id="@beta/b1", fence=99),
            metadata=bearer_metadata(alpha_worker),
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "cannot reach namespace 'beta'" in str(error.details())
        no_key = refused(journal.LoadJournal, jpb.LoadJournalRequest(workflow_id="b1", fence=99))
        assert no_key.code() == grpc.StatusCode.UNAUTHENTICATED
        operator = refused(
            journal.LoadJournal,
            jpb.LoadJournalRequest(workflow_id="@beta/b1", fence=99),
            metadata=bearer_metadata(beta_operator),
        )
        assert operator.code() == grpc.StatusCode.PERMISSION_DENIED
    with Client(secured.gateway, api_key=beta_operator) as beta:
        assert beta.describe("b1").workflow.fence == 1  # the refused loads raised nothing


def test_roles_limit_what_a_key_may_do(secured: Cluster) -> None:
    reader = make_key(secured, "default", "reader")
    operator = make_key(secured, "default", "operator")
    worker = make_key(secured, "default", "worker", "*")
    secured.start_worker("w1", PERDURE_API_KEY=worker)
    with grpc.insecure_channel(secured.gateway) as channel:
        workflows = apigrpc.WorkflowServiceStub(channel)
        admin_stub = admingrpc.AdminServiceStub(channel)
        start = api.StartWorkflowRequest(workflow_type="clock", workflow_id="c1")

        denied = refused(workflows.StartWorkflow, start, metadata=bearer_metadata(reader))
        assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "has role reader" in str(denied.details()) and "needs role operator" in str(
            denied.details()
        )
        workflows.StartWorkflow(start, metadata=bearer_metadata(operator), timeout=30)
        listed = workflows.ListWorkflows(
            api.ListWorkflowsRequest(), metadata=bearer_metadata(reader), timeout=30
        )
        assert [w.workflow_id for w in listed.workflows] == ["c1"]
        # Builds: a reader sees them, only an operator sets a routing policy, in its namespace.
        workers = admin_stub.ListWorkers(
            admin.ListWorkersRequest(), metadata=bearer_metadata(reader), timeout=30
        )
        assert [w.identity for w in workers.workers] == ["w1"]
        policy = admin.SetWorkflowPolicyRequest(
            workflow_type="clock", policy=admin.ROUTING_POLICY_PINNED
        )
        denied = refused(admin_stub.SetWorkflowPolicy, policy, metadata=bearer_metadata(reader))
        assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
        set_to = admin_stub.SetWorkflowPolicy(
            policy, metadata=bearer_metadata(operator), timeout=30
        ).policy
        assert (set_to.namespace, set_to.policy) == ("default", admin.ROUTING_POLICY_PINNED)
        elsewhere = admin.ListBuildsRequest(namespace="acme")
        assert (
            refused(admin_stub.ListBuilds, elsewhere, metadata=bearer_metadata(reader)).code()
            == grpc.StatusCode.PERMISSION_DENIED
        )

        # Storage and export: a reader's, in its namespace; import: an admin's only.
        storage = admin_stub.GetStorage(
            admin.GetStorageRequest(), metadata=bearer_metadata(reader), timeout=30
        )
        assert storage.namespace.namespace == "default" and storage.namespace.runs == 1
        assert (
            refused(
                admin_stub.GetStorage,
                admin.GetStorageRequest(namespace="acme"),
                metadata=bearer_metadata(reader),
            ).code()
            == grpc.StatusCode.PERMISSION_DENIED
        )
        archive = admin_stub.ExportWorkflow(
            admin.ExportWorkflowRequest(workflow_id="c1"),
            metadata=bearer_metadata(reader),
            timeout=30,
        ).archive
        for token in (reader, operator):
            denied = refused(
                admin_stub.ImportWorkflow,
                admin.ImportWorkflowRequest(archive=archive),
                metadata=bearer_metadata(token),
            )
            assert denied.code() == grpc.StatusCode.PERMISSION_DENIED, denied.details()

        create = admin.CreateApiKeyRequest(role=admin.ROLE_READER)
        assert (
            refused(admin_stub.CreateApiKey, create, metadata=bearer_metadata(operator)).code()
            == grpc.StatusCode.PERMISSION_DENIED
        )
        for token in (worker, ""):
            error = refused(
                workflows.DescribeWorkflow,
                api.DescribeWorkflowRequest(workflow_id="c1"),
                metadata=bearer_metadata(token) if token else None,
            )
            expected = (
                grpc.StatusCode.PERMISSION_DENIED if token else grpc.StatusCode.UNAUTHENTICATED
            )
            assert error.code() == expected, error.details()
        for forged in ("prd_nokey_secret", operator[:-4] + "AAAA", "not-a-key"):
            error = refused(
                workflows.ListWorkflows,
                api.ListWorkflowsRequest(),
                metadata=bearer_metadata(forged),
            )
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert error_reason(error) == "API_KEY_INVALID"
    # Health stays open: probes carry no key.
    with grpc.insecure_channel(secured.gateway) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert status.status == health_pb2.HealthCheckResponse.SERVING


def test_a_revoked_key_stops_working_at_once_and_admin_actions_are_audited(
    secured: Cluster, tmp_path: Path
) -> None:
    admin_token = make_key(secured, "default", "admin")
    worker_token = make_key(secured, "default", "worker", "*")
    worker = secured.start_worker("w1", PERDURE_API_KEY=worker_token)
    with grpc.insecure_channel(secured.gateway) as channel:
        keys = admingrpc.AdminServiceStub(channel)
        as_admin = bearer_metadata(admin_token)
        made = keys.CreateApiKey(
            admin.CreateApiKeyRequest(role=admin.ROLE_OPERATOR, name="ci"),
            metadata=as_admin,
            timeout=30,
        )
        assert made.token.startswith(f"prd_{made.key.key_id}_")
        operator = Client(secured.gateway, api_key=made.token)
        operator.start_workflow("five_steps", {"ledger": str(tmp_path / "l")}, workflow_id="w-1")
        operator.wait("w-1", timeout=60)
        listed = keys.ListApiKeys(admin.ListApiKeysRequest(), metadata=as_admin, timeout=30)
        assert made.key.key_id in [k.key_id for k in listed.keys]
        assert all(not hasattr(k, "token") for k in listed.keys)

        revoked = keys.RevokeApiKey(
            admin.RevokeApiKeyRequest(key_id=made.key.key_id), metadata=as_admin, timeout=30
        )
        assert revoked.revoked
        with pytest.raises(grpc.RpcError) as caught:
            operator.describe("w-1")  # the very next call
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(caught.value) == "API_KEY_REVOKED"

        # A revoked worker key loses its stream, and the worker cannot come back with it.
        worker_id = worker_token.split("_")[1]
        keys.RevokeApiKey(
            admin.RevokeApiKeyRequest(key_id=worker_id), metadata=as_admin, timeout=30
        )
        wait_until(
            lambda: "API_KEY_REVOKED" in worker.output() or "revoked" in worker.output(),
            30,
            "the worker's stream to be closed",
        )
        with Client(secured.gateway, api_key=admin_token) as client:
            client.start_workflow("clock", workflow_id="t-1")
            client.terminate("t-1", reason="test")
            client.start_workflow("clock", workflow_id="t-2")
            client.cancel("t-2", reason="no longer needed")
        audit = keys.ListAuditEvents(admin.ListAuditEventsRequest(), metadata=as_admin, timeout=30)
    actions = [(e.action, e.target, e.key_id) for e in audit.events]
    admin_id = admin_token.split("_")[1]
    assert actions[:5] == [
        ("CANCEL_REQUESTED", "t-2", admin_id),
        ("WORKFLOW_TERMINATED", "t-1", admin_id),
        ("API_KEY_REVOKED", worker_id, admin_id),
        ("API_KEY_REVOKED", made.key.key_id, admin_id),
        ("API_KEY_CREATED", made.key.key_id, admin_id),
    ]
    assert audit.events[0].details["reason"] == "no longer needed"
    assert all(admin_token not in str(e) and made.token not in str(e) for e in audit.events)


def test_a_key_revoked_past_the_gateway_is_refused_once_its_checks_expire(
    secured: Cluster,
) -> None:
    """The gateway remembers a key it verified (auth.RememberedKeys), so a revocation it did
    not pass along (the CLI's --database-url, another gateway) reaches it only when that
    memory expires: it must, and then every call is refused."""
    token = make_key(secured, "default", "reader")
    key_id = token.split("_")[1]
    with Client(secured.gateway, api_key=token) as client:
        assert not client.list().workflows  # verified, and remembered
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "perdure.cli",
                "keys",
                "revoke",
                key_id,
                "--database-url",
                secured.dsn,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr

        def refused_now() -> bool:
            try:
                client.list()
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
                assert error_reason(error) == "API_KEY_REVOKED"
                return True
            return False

        wait_until(refused_now, 30, "the revoked key to be refused")
        assert refused_now()  # and it stays refused


def test_oversize_payloads_and_messages_are_refused_naming_the_limit(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w1")
    with grpc.insecure_channel(cluster.gateway) as channel:
        stub = apigrpc.WorkflowServiceStub(channel)
        big = api.StartWorkflowRequest(workflow_type="clock", workflow_id="big")
        big.input.CopyFrom(to_payload("x" * (3 * 1024 * 1024)))
        error = refused(stub.StartWorkflow, big)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "the limit is 2097152 bytes" in str(error.details())
        huge = api.StartWorkflowRequest(workflow_type="clock", workflow_id="huge")
        huge.input.CopyFrom(to_payload("x" * (MAX_MESSAGE_BYTES + 1024)))
        error = refused(stub.StartWorkflow, huge)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert str(MAX_MESSAGE_BYTES) in str(error.details())  # the message limit, named
        with pytest.raises(grpc.RpcError):
            stub.DescribeWorkflow(api.DescribeWorkflowRequest(workflow_id="big"), timeout=30)


def test_call_rates_per_key_and_stream_messages_are_capped(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(
        PERDURE_AUTH="on", PERDURE_RATE_LIMIT="2", PERDURE_STREAM_MESSAGE_RATE="5"
    )
    calm, busy = make_key(cluster, "default", "reader"), make_key(cluster, "default", "reader")
    with grpc.insecure_channel(cluster.gateway) as channel:
        stub = apigrpc.WorkflowServiceStub(channel)
        codes = []
        for _ in range(30):
            try:
                stub.ListWorkflows(api.ListWorkflowsRequest(), metadata=bearer_metadata(busy))
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                codes.append(error.code())
                limited = error
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes and codes[0] == grpc.StatusCode.OK
        assert "over its limit of 2 calls per second" in str(limited.details())
        # Another key has its own budget.
        stub.ListWorkflows(api.ListWorkflowsRequest(), metadata=bearer_metadata(calm), timeout=30)

    worker = make_key(cluster, "default", "worker", "*")
    hello = tpb.ConnectRequest(
        hello=tpb.Hello(task_queue="default", workflow_types=["clock"], capacity=1)
    )
    flood = [hello, *[tpb.ConnectRequest(heartbeat=tpb.Heartbeat()) for _ in range(100)]]
    with (
        grpc.insecure_channel(cluster.address("scheduler")) as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        for _ in tgrpc.TaskServiceStub(channel).Connect(
            iter(flood), metadata=bearer_metadata(worker), timeout=30
        ):
            pass
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than 5 messages per second" in str(caught.value.details())


def test_describe_shows_a_runs_namespace_without_keys(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """With authentication off, requests name their namespace themselves."""
    cluster = start_cluster()
    cluster.start_worker("w1", PERDURE_NAMESPACE="team-a")
    with Client(cluster.gateway, namespace="team-a") as team, cluster.client() as default:
        team.start_workflow("clock", workflow_id="c")
        team.wait("c", timeout=60)
        assert team.describe("c").workflow.namespace == "team-a"
        with pytest.raises(grpc.RpcError) as caught:
            default.describe("c")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert list(default.list().workflows) == []


def test_only_the_worker_granted_a_lease_may_load_or_write_under_it(
    secured: Cluster, tmp_path: Path
) -> None:
    """Another worker key of the same namespace and queue can neither take up nor write under
    a lease the scheduler granted to a worker of another key, whatever fence it claims, and
    cannot renew it from a hello of its own."""
    holder_key = make_key(secured, "default", "worker", "default")
    rogue_key = make_key(secured, "default", "worker", "default")
    secured.start_worker("holder", PERDURE_API_KEY=holder_key)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    with Client(secured.gateway, api_key=make_key(secured, "default", "operator")) as client:
        client.start_workflow(
            "blocks_in_third", {"ledger": str(ledger), "gate": str(gate)}, workflow_id="held"
        )
        wait_until(
            lambda: "step_3" in ledger.read_text() if ledger.exists() else False, 60, "step 3"
        )
        fence = client.describe("held").workflow.fence
        as_rogue = bearer_metadata(rogue_key)
        with grpc.insecure_channel(secured.address("history")) as channel:
            journal = jgrpc.JournalServiceStub(channel)
            for claimed in (fence, fence + 1):
                load = jpb.LoadJournalRequest(workflow_id="held", fence=claimed)
                error = refused(journal.LoadJournal, load, metadata=as_rogue)
                assert error.code() == grpc.StatusCode.PERMISSION_DENIED
                assert error_reason(error) == "LEASE_NOT_HELD"
            write = jpb.SetStateRequest(
                workflow_id="held",
                fence=fence,
                step_id="rogue",
                step_name="rogue",
                position=3,
                key="phase",
            )
            write.value.CopyFrom(to_payload("hijacked"))
            error = refused(journal.SetState, write, metadata=as_rogue)
            assert error_reason(error) == "LEASE_NOT_HELD"
        with grpc.insecure_channel(secured.address("scheduler")) as channel:
            stolen = tpb.ConnectRequest(
                hello=tpb.Hello(
                    task_queue="default",
                    workflow_types=["blocks_in_third"],
                    capacity=1,
                    leases=[tpb.LeaseRef(workflow_id="held", fence=fence)],
                )
            )
            stream = tgrpc.TaskServiceStub(channel).Connect(iter([stolen]), metadata=as_rogue)
            assert next(stream).HasField("welcome")
            stream.cancel()
        gate.touch()
        described = client.wait("held", timeout=60)
        written = [e.step_id for e in client.history("held")]
    result = from_payload(described.workflow.result)
    assert result["fence"] == fence  # the holder kept its lease to the end
    assert "rogue" not in written
