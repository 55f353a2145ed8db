"""The internal surface answers Perdure's services only: every RPC of every `perdure.internal.*`
service, found by server reflection (so one added later is covered), is refused to anyone
else, whatever they hold; the gateway's own calls go through.

An attacker here has the network: history's and the scheduler's ports, which every worker must
reach, and the keys or certificates a worker or client may hold.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.common.service_identity import SECRET_HEADER
from perdure.internal.history.v1 import approval_service_pb2 as happrovals
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.history.v1 import schedule_service_pb2 as hschedules
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from tests.fixtures.cluster import Cluster
from tests.fixtures.keys import make_key
from tests.fixtures.tls import make_certs, tls_channel

INTERNAL_PACKAGE = "perdure.internal."
# Every internal service the code defines: reflection must find each on some port.
DEFINED = {
    hpb.DESCRIPTOR.services_by_name["HistoryService"].full_name,
    spb.DESCRIPTOR.services_by_name["SchedulerService"].full_name,
    hschedules.DESCRIPTOR.services_by_name["HistoryScheduleService"].full_name,
    happrovals.DESCRIPTOR.services_by_name["HistoryApprovalService"].full_name,
}
REFUSED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
Metadata = tuple[tuple[str, str], ...]


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def internal_methods(channel: grpc.Channel) -> Iterator[tuple[str, MethodDescriptor]]:
    """Every method of every perdure.internal.* service the server behind `channel` holds,
    as its reflection describes it."""
    database = ProtoReflectionDescriptorDatabase(channel)
    pool = descriptor_pool.DescriptorPool(database)
    for service in database.get_services():
        if service.startswith(INTERNAL_PACKAGE):
            for method in pool.FindServiceByName(service).methods:
                yield service, method


def call(
    channel: grpc.Channel, service: str, method: MethodDescriptor, metadata: Metadata
) -> grpc.StatusCode:
    """Call `method` with an empty request (of any shape) and `metadata`; its status."""
    path = f"/{service}/{method.name}"
    empty = (lambda _: b"", lambda raw: raw)
    try:
        if method.client_streaming and method.server_streaming:
            list(channel.stream_stream(path, *empty)(iter([b""]), metadata=metadata, timeout=10))
        elif method.client_streaming:
            channel.stream_unary(path, *empty)(iter([b""]), metadata=metadata, timeout=10)
        elif method.server_streaming:
            list(channel.unary_stream(path, *empty)(b"", metadata=metadata, timeout=10))
        else:
            channel.unary_unary(path, *empty)(b"", metadata=metadata, timeout=10)
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


def refusals(
    cluster: Cluster, open_channel: Callable[[str], grpc.Channel], metadata: Metadata
) -> dict[str, grpc.StatusCode]:
    """The status of every internal RPC on history's and the scheduler's ports."""
    found: dict[str, grpc.StatusCode] = {}
    for service_process in ("history", "scheduler"):
        with open_channel(cluster.address(service_process)) as channel:
            for service, method in internal_methods(channel):
                found[f"{service}/{method.name}"] = call(channel, service, method, metadata)
    assert {name.partition("/")[0] for name in found} == DEFINED
    return found


def run_a_workflow(cluster: Cluster, operator: str, workflow_id: str, ledger: Path) -> None:
    """The gateway's own calls (to the scheduler, and to history on the operator's behalf)."""
    with Client(cluster.gateway, api_key=operator) as client:
        client.start_workflow("five_steps", {"ledger": str(ledger)}, workflow_id=workflow_id)
        described = client.wait(workflow_id, timeout=90)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED


def test_no_key_token_or_secret_but_the_services_own_reaches_an_internal_rpc(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = start_cluster(PERDURE_AUTH="on")
    worker_key = make_key(cluster, "default", "worker", "default")
    admin_key = make_key(cluster, "default", "admin")
    operator = make_key(cluster, "default", "operator")
    cluster.start_worker("honest", PERDURE_API_KEY=worker_key)
    wrong_secret = ((SECRET_HEADER, secrets.token_urlsafe(32)),)
    plaintext = grpc.insecure_channel
    attempts = {
        "no credentials": (),
        "a worker key": bearer(worker_key),
        "an admin key": bearer(admin_key),
        "a wrong internal secret": wrong_secret,
        "a worker key and a wrong secret": (*bearer(worker_key), *wrong_secret),
    }
    for what, metadata in attempts.items():
        answered = refusals(cluster, plaintext, metadata)
        allowed = {rpc: code for rpc, code in answered.items() if code not in REFUSED}
        assert allowed == {}, f"with {what}: {allowed}"
    # The call, exactly: an admin key for namespace default, asked with no credentials.
    vouched = (("perdure-caller-namespace", "default"), ("perdure-caller-key-id", "x"))
    with plaintext(cluster.address("history")) as channel, pytest.raises(grpc.RpcError) as refused:
        hgrpc.HistoryServiceStub(channel).CreateApiKey(
            hpb.CreateApiKeyRequest(
                request=admin.CreateApiKeyRequest(role=admin.ROLE_ADMIN, name="x")
            ),
            metadata=vouched,
            timeout=10,
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "internal" in (refused.value.details() or "")
    with plaintext(cluster.gateway) as channel:
        listed = admingrpc.AdminServiceStub(channel).ListApiKeys(
            admin.ListApiKeysRequest(include_revoked=True), metadata=bearer(admin_key), timeout=10
        )
    assert "x" not in {key.name for key in listed.keys}
    # The services' own calls are unaffected: starts, grants, journal writes, the audit trail.
    run_a_workflow(cluster, operator, "served", tmp_path / "ledger")
    # With the services' secret, the same port answers: the refusals above were about identity.
    with plaintext(cluster.address("scheduler")) as channel:
        service = spb.DESCRIPTOR.services_by_name["SchedulerService"]
        method = service.methods_by_name["DescribeTaskQueue"]
        secret = ((SECRET_HEADER, cluster.internal_secret),)
        assert call(channel, service.full_name, method, secret) == grpc.StatusCode.INVALID_ARGUMENT


def test_under_mtls_only_a_service_certificate_proves_a_service(
    start_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """No internal secret at all: the services prove themselves by their certificates, and a
    worker's or client's certificate of the same CA proves nothing."""
    certs = make_certs(tmp_path / "certs")
    cluster = start_cluster(certs=certs, internal_secret=False, PERDURE_AUTH="on")
    worker_key = make_key(cluster, "default", "worker", "default")
    cluster.start_worker("honest", PERDURE_API_KEY=worker_key)
    for role in ("worker", "client"):
        for metadata in ((), bearer(worker_key)):
            answered = refusals(
                cluster, functools.partial(tls_channel, certs=certs, role=role), metadata
            )
            allowed = {rpc: code for rpc, code in answered.items() if code not in REFUSED}
            assert allowed == {}, f"with the {role} certificate: {allowed}"
    # The same calls with a service's certificate are answered (a bad request, not a refusal).
    with tls_channel(cluster.address("history"), certs, "gateway") as channel:
        service = hpb.DESCRIPTOR.services_by_name["HistoryService"]
        method = service.methods_by_name["DescribeWorkflow"]
        assert call(channel, service.full_name, method, ()) == grpc.StatusCode.INVALID_ARGUMENT
    os_env = {
        "PERDURE_TLS_CA": str(certs / "ca.pem"),
        "PERDURE_TLS_CERT": str(certs / "client.pem"),
        "PERDURE_TLS_KEY": str(certs / "client-key.pem"),
    }
    with pytest.MonkeyPatch.context() as patch:
        for variable, value in os_env.items():
            patch.setenv(variable, value)
        operator = make_key(cluster, "default", "operator")
        run_a_workflow(cluster, operator, "served-over-mtls", tmp_path / "ledger")


def test_a_service_without_a_way_to_prove_itself_does_not_start(
    start_cluster: Callable[..., Cluster],
) -> None:
    """Keys on, no internal secret and no service certificate: each service says what to set
    instead of serving a surface it cannot protect."""
    with pytest.raises(AssertionError) as failed:
        start_cluster(internal_secret=False, PERDURE_AUTH="on")
    assert "PERDURE_INTERNAL_SECRET" in str(failed.value)
