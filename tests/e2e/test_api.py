"""The public API through the gateway: idempotent starts and a precise status for bad input."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import Client
from perdure.common.payload import json_payload
from perdure.worker._payload import to_payload
from tests.chaos.proxy import HOLD_REPLIES, RESET, Proxy
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.workflows"  # what the shared cluster's worker serves


@pytest.fixture
def api_cluster(cluster: Cluster) -> Cluster:
    """A cluster with a worker, so workflow types are registered."""
    cluster.start_worker("w1")
    return cluster


@pytest.fixture
def stub(shared: Cluster) -> Iterator[apigrpc.WorkflowServiceStub]:
    """A raw stub, to send requests the client would refuse to build. Its tests send only
    requests that must be refused, which change nothing: they share the module's cluster."""
    with grpc.insecure_channel(shared.gateway) as channel:
        yield apigrpc.WorkflowServiceStub(channel)


def rejection(call: object, request: object) -> grpc.RpcError:
    """Send a request that must fail and return its error."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=30)  # type: ignore[operator]
    return caught.value


def test_start_is_idempotent_by_workflow_id(api_cluster: Cluster, tmp_path: Path) -> None:
    params = {"ledger": str(tmp_path / "ledger")}
    with api_cluster.client() as client:
        first = client.start_workflow("five_steps", params, workflow_id="same")
        second = client.start_workflow("five_steps", params, workflow_id="same")
        client.wait("same", timeout=60)
        third = client.start_workflow("five_steps", params, workflow_id="same")
        listed = client.list(workflow_type="five_steps")
    assert first.started and not second.started and not third.started
    assert third.status == wf.WORKFLOW_STATUS_COMPLETED
    assert [w.workflow_id for w in listed.workflows] == ["same"]
    assert len((tmp_path / "ledger").read_text().splitlines()) == 5  # ran once


def test_a_start_without_an_id_sent_again_after_a_lost_answer_starts_one_run(
    api_cluster: Cluster,
) -> None:
    proxy = Proxy()
    try:
        link = proxy.link("client", "gateway", ("127.0.0.1", api_cluster.ports["gateway"]))
        with (
            Client(f"127.0.0.1:{link.port}") as client,
            api_cluster.client() as direct,
            ThreadPoolExecutor(1) as pool,
        ):
            client.list()  # connected: the gateway's handshake is through
            proxy.apply([link], HOLD_REPLIES)
            sent = pool.submit(client.start_workflow, "loop_agent", {"turns": 1})
            wait_until(
                lambda: len(direct.list(workflow_type="loop_agent").workflows) == 1,
                60,
                "the start to be served",
            )
            # Its answer is lost with the connection: the client's retry sends it again.
            proxy.apply([link], RESET)
            proxy.heal()
            started = sent.result(timeout=60)
            listed = direct.list(workflow_type="loop_agent")
    finally:
        proxy.close()
    assert not started.started  # the retry found the run its first send had started
    assert [w.workflow_id for w in listed.workflows] == [started.workflow_id]


def test_same_id_with_a_different_request_is_a_conflict(
    api_cluster: Cluster, tmp_path: Path
) -> None:
    with api_cluster.client() as client:
        client.start_workflow("loop_agent", {"turns": 1}, workflow_id="taken")
        with pytest.raises(grpc.RpcError) as caught:
            client.start_workflow("loop_agent", {"turns": 2}, workflow_id="taken")
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert error_reason(caught.value) == "WORKFLOW_ID_CONFLICT"
    assert "input" in (caught.value.details() or "")


def test_generated_ids_and_default_queue(api_cluster: Cluster) -> None:
    with api_cluster.client() as client:
        started = client.start_workflow("loop_agent", {"turns": 1})
        described = client.wait(started.workflow_id, timeout=60)
    assert len(started.workflow_id) == 36
    assert described.workflow.task_queue == "default"


@pytest.mark.parametrize(
    ("request_", "code", "reason", "mentions"),
    [
        (
            api.StartWorkflowRequest(),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "workflow_type is required",
        ),
        (
            api.StartWorkflowRequest(workflow_type="has space"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "not a valid name",
        ),
        (
            api.StartWorkflowRequest(workflow_type="nobody_serves_this"),
            grpc.StatusCode.NOT_FOUND,
            "WORKFLOW_TYPE_NOT_REGISTERED",
            "nobody_serves_this",
        ),
        (
            api.StartWorkflowRequest(workflow_type="loop_agent", task_queue="elsewhere"),
            grpc.StatusCode.NOT_FOUND,
            "WORKFLOW_TYPE_NOT_REGISTERED",
            "elsewhere",
        ),
        (
            api.StartWorkflowRequest(workflow_type="loop_agent", workflow_id="x" * 256),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "limit is 255",
        ),
        (
            api.StartWorkflowRequest(workflow_type="loop_agent", workflow_id=" padded"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "whitespace",
        ),
        (
            api.StartWorkflowRequest(workflow_type="loop_agent", input=json_payload("NaN")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "NaN is not a JSON number",
        ),
        (
            api.StartWorkflowRequest(
                workflow_type="loop_agent",
                input=Payload(encoding="text/yaml", data=b"a: 1"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "input has encoding 'text/yaml'; the encodings are json/plain, binary/plain",
        ),
        (
            api.StartWorkflowRequest(
                workflow_type="loop_agent",
                input=to_payload("x" * (3 * 1024 * 1024)),
            ),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "PAYLOAD_TOO_LARGE",
            "limit",
        ),
    ],
    ids=[
        "empty-type",
        "bad-type",
        "unknown-type",
        "unknown-queue",
        "long-id",
        "padded-id",
        "nan-input",
        "unset-value",
        "huge-input",
    ],
)
def test_bad_starts_are_rejected_precisely(
    stub: apigrpc.WorkflowServiceStub,
    request_: api.StartWorkflowRequest,
    code: grpc.StatusCode,
    reason: str,
    mentions: str,
) -> None:
    error = rejection(stub.StartWorkflow, request_)
    assert error.code() == code
    assert error_reason(error) == reason
    assert mentions in (error.details() or "")


def test_unknown_workflow_ids_are_not_found(stub: apigrpc.WorkflowServiceStub) -> None:
    for call, request in (
        (stub.DescribeWorkflow, api.DescribeWorkflowRequest(workflow_id="ghost")),
        (stub.GetWorkflowHistory, api.GetWorkflowHistoryRequest(workflow_id="ghost")),
        (stub.SignalWorkflow, api.SignalWorkflowRequest(workflow_id="ghost", signal_name="s")),
        (stub.CancelWorkflow, api.CancelWorkflowRequest(workflow_id="ghost")),
        (stub.TerminateWorkflow, api.TerminateWorkflowRequest(workflow_id="ghost")),
        (stub.QueryWorkflow, api.QueryWorkflowRequest(workflow_id="ghost", key="k")),
    ):
        error = rejection(call, request)
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(error) == "WORKFLOW_NOT_FOUND"
        assert "ghost" in (error.details() or "")


def test_malformed_reads_are_invalid_arguments(stub: apigrpc.WorkflowServiceStub) -> None:
    cases = [
        (stub.DescribeWorkflow, api.DescribeWorkflowRequest(), "workflow_id is required"),
        (
            stub.GetWorkflowHistory,
            api.GetWorkflowHistoryRequest(workflow_id="ghost", page_size=-1),
            "page_size",
        ),
        (stub.ListWorkflows, api.ListWorkflowsRequest(page_size=5000), "page_size"),
        (stub.ListWorkflows, api.ListWorkflowsRequest(status=42), "status 42"),  # type: ignore[arg-type]
        (stub.ListWorkflows, api.ListWorkflowsRequest(page_token="garbage!"), "page_token"),
    ]
    for call, request, mentions in cases:
        error = rejection(call, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, request
        assert mentions in (error.details() or ""), error.details()


HUGE = to_payload("x" * (3 * 1024 * 1024))


@pytest.mark.parametrize(
    ("method", "request_", "code", "mentions"),
    [
        (
            "SignalWorkflow",
            api.SignalWorkflowRequest(signal_name="s"),
            "INVALID_ARGUMENT",
            "workflow_id",
        ),
        (
            "SignalWorkflow",
            api.SignalWorkflowRequest(workflow_id="w"),
            "INVALID_ARGUMENT",
            "signal_name is required",
        ),
        (
            "SignalWorkflow",
            api.SignalWorkflowRequest(workflow_id="w", signal_name="no spaces"),
            "INVALID_ARGUMENT",
            "signal_name",
        ),
        (
            "SignalWorkflow",
            api.SignalWorkflowRequest(workflow_id="w", signal_name="s", signal_id="x" * 300),
            "INVALID_ARGUMENT",
            "signal_id",
        ),
        (
            "SignalWorkflow",
            api.SignalWorkflowRequest(workflow_id="w", signal_name="s", payload=HUGE),
            "RESOURCE_EXHAUSTED",
            "payload",
        ),
        (
            "SignalWithStartWorkflow",
            api.SignalWithStartWorkflowRequest(
                start=api.StartWorkflowRequest(workflow_type="loop_agent"), signal_name="s"
            ),
            "INVALID_ARGUMENT",
            "start.workflow_id",
        ),
        (
            "SignalWithStartWorkflow",
            api.SignalWithStartWorkflowRequest(
                start=api.StartWorkflowRequest(
                    workflow_type="nobody_serves_this", workflow_id="sws"
                ),
                signal_name="s",
            ),
            "NOT_FOUND",
            "nobody_serves_this",
        ),
        (
            "CancelWorkflow",
            api.CancelWorkflowRequest(workflow_id="w", reason="r" * 1001),
            "INVALID_ARGUMENT",
            "reason",
        ),
        ("TerminateWorkflow", api.TerminateWorkflowRequest(), "INVALID_ARGUMENT", "workflow_id"),
        (
            "QueryWorkflow",
            api.QueryWorkflowRequest(workflow_id="w"),
            "INVALID_ARGUMENT",
            "key is required",
        ),
    ],
    ids=[
        "signal-no-id",
        "signal-no-name",
        "signal-bad-name",
        "signal-long-signal-id",
        "signal-huge-payload",
        "signal-with-start-no-id",
        "signal-with-start-unknown-type",
        "cancel-long-reason",
        "terminate-no-id",
        "query-no-key",
    ],
)
def test_bad_signals_cancels_and_queries_are_rejected_precisely(
    stub: apigrpc.WorkflowServiceStub, method: str, request_: object, code: str, mentions: str
) -> None:
    error = rejection(getattr(stub, method), request_)
    assert error.code().name == code
    assert mentions in (error.details() or ""), error.details()


def test_listing_pages_newest_first(api_cluster: Cluster) -> None:
    with api_cluster.client() as client:
        for index in range(5):
            client.start_workflow("loop_agent", {"turns": 0}, workflow_id=f"page-{index}")
        first = client.list(page_size=2)
        second = client.list(page_size=2, page_token=first.next_page_token)
        third = client.list(page_size=2, page_token=second.next_page_token)
    ids = [w.workflow_id for page in (first, second, third) for w in page.workflows]
    assert ids == [f"page-{i}" for i in (4, 3, 2, 1, 0)]
    assert third.next_page_token == ""


def test_client_refuses_values_that_are_not_json(api_cluster: Cluster) -> None:
    with api_cluster.client() as client, pytest.raises(TypeError, match="not encodable"):
        client.start_workflow("loop_agent", {"when": object()})


def test_the_worker_protocol_validates_what_workers_write(api_cluster: Cluster) -> None:
    with api_cluster.client() as client:
        client.start_workflow("loop_agent", {"turns": 0}, workflow_id="proto-1")
        client.wait("proto-1", timeout=60)
    nan = json_payload("NaN")
    nan_free = to_payload("fine")
    cases: list[tuple[Any, str]] = [
        (jpb.LoadJournalRequest(workflow_id="proto-1", fence=0), "fence"),
        (
            jpb.RecordStepRequest(workflow_id="proto-1", fence=99, step_id="a", step_name="a"),
            "one of output or failure",
        ),
        (
            jpb.RecordStepRequest(
                workflow_id="proto-1", fence=99, step_id="a", step_name="a", output=nan
            ),
            "NaN is not a JSON number",
        ),
        (
            jpb.FinishWorkflowRequest(workflow_id="proto-1", fence=99, result=nan),
            "NaN is not a JSON number",
        ),
    ]
    lease: dict[str, Any] = {"workflow_id": "proto-1", "fence": 99}
    call_ref = {**lease, "step_id": "a", "step_name": "a"}
    one_second = duration_pb2.Duration(seconds=1)
    cases += [
        (
            jpb.RecordStepRequest(**call_ref, output=nan_free, retry_delay=one_second),
            "retry_delay goes with a failure",
        ),
        (jpb.StartTimerRequest(**call_ref), "one of delay or fire_time"),
        (
            jpb.ConsumeSignalsRequest(**call_ref, signal_name="s", timed_out=True, event_ids=[3]),
            "consumes no signals",
        ),
        (jpb.ConsumeSignalsRequest(**call_ref), "signal_name is required"),
        (jpb.SetStateRequest(**call_ref, value=nan_free), "key must have"),
        (jpb.RecordHeartbeatRequest(**lease), "step_id is required"),
        (jpb.SuspendWorkflowRequest(**lease), "wait.kind and wait.name"),
        (
            jpb.SuspendWorkflowRequest(
                **lease, wait=wf.Wait(kind=wf.WAIT_KIND_TIMER, name="$sleep")
            ),
            "need wait.until",
        ),
    ]
    with grpc.insecure_channel(api_cluster.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        for request, mentions in cases:
            call = getattr(journal, type(request).__name__.removesuffix("Request"))
            error = rejection(call, request)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, request
            assert mentions in (error.details() or "")
        closed = rejection(
            journal.RecordStep,
            jpb.RecordStepRequest(
                workflow_id="proto-1",
                fence=99,
                step_id="a",
                step_name="a",
                output=to_payload("late"),
            ),
        )
    assert closed.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(closed) == "WORKFLOW_CLOSED"
