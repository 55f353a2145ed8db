"""Generated and mutated requests against every public RPC (watches too) and the worker
protocol: each is answered with a status that says what was wrong (never UNKNOWN or INTERNAL),
no service crashes, and the journal stays consistent. `make fuzz` runs many more examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import descriptor as d
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import approval_service_pb2 as approvals
from perdure.api.workflow.v1 import schedule_service_pb2 as schedules
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.rpc import error_reason
from tests.fuzz.strategies import messages, mutated

# The 70,000-character strings make hypothesis warn that their repr is long: it is meant.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
CALL_TIMEOUT = 30.0
# Codes that say what was wrong with the request, or that it worked.
PROPER = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.OUT_OF_RANGE,
}


def unary_methods(service: d.ServiceDescriptor) -> list[d.MethodDescriptor]:
    return [m for m in service.methods if not (m.client_streaming or m.server_streaming)]


PUBLIC = (
    unary_methods(api.DESCRIPTOR.services_by_name["WorkflowService"])
    + unary_methods(schedules.DESCRIPTOR.services_by_name["ScheduleService"])
    + unary_methods(admin.DESCRIPTOR.services_by_name["AdminService"])
    + unary_methods(approvals.DESCRIPTOR.services_by_name["ApprovalService"])
)
JOURNAL = unary_methods(jpb.DESCRIPTOR.services_by_name["JournalService"])
TASKS = unary_methods(tpb.DESCRIPTOR.services_by_name["TaskService"])
TARGETS = (
    [("gateway", m) for m in PUBLIC]
    + [("history", m) for m in JOURNAL]
    + [("scheduler", m) for m in TASKS]
)


def caller(cluster: Cluster, service: str, method: d.MethodDescriptor) -> Callable[[bytes], None]:
    """Send raw request bytes to the method; fail unless the answer is a proper status."""
    channel = grpc.insecure_channel(cluster.address(service))
    send: Any = channel.unary_unary(f"/{method.containing_service.full_name}/{method.name}")

    def call(request: bytes) -> None:
        try:
            send(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            code, details = error.code(), error.details()
            assert code in PROPER, f"{method.full_name} answered {code.name}: {details}"
            assert details, f"{method.full_name} answered {code.name} without a message"
        assert_alive(cluster)

    return call


def assert_alive(cluster: Cluster) -> None:
    dead = [p.name for p in cluster.processes if p.popen.poll() is not None]
    assert not dead, f"crashed: {dead}"


@pytest.mark.parametrize(("service", "method"), TARGETS, ids=lambda t: getattr(t, "name", t))
def test_generated_requests_get_a_proper_status(
    fuzz_cluster: Cluster, service: str, method: d.MethodDescriptor
) -> None:
    call = caller(fuzz_cluster, service, method)

    @given(request=messages(method.input_type))
    def check(request: Message) -> None:
        call(request.SerializeToString())

    check()


@pytest.mark.parametrize(("service", "method"), TARGETS, ids=lambda t: getattr(t, "name", t))
def test_mutated_requests_get_a_proper_status(
    fuzz_cluster: Cluster, service: str, method: d.MethodDescriptor
) -> None:
    call = caller(fuzz_cluster, service, method)

    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        valid = data.draw(messages(method.input_type)).SerializeToString()
        call(data.draw(mutated(valid)))

    check()


def frames(descriptor: Any) -> st.SearchStrategy[bytes]:
    """A stream message: generated, or bytes that may not decode at all."""
    generated = messages(descriptor).map(lambda m: m.SerializeToString())
    return st.one_of(generated, st.binary(max_size=60))


def drain(stream: Any, what: str) -> list[bytes]:
    """Every answer of a stream, which must end with OK or a proper status."""
    answers: list[bytes] = []
    try:
        answers.extend(stream)
    except grpc.RpcError as error:
        code, details = error.code(), error.details()
        assert code in PROPER, f"{what} answered {code.name}: {details}"
    return answers


WATCHES = [
    m
    for m in api.DESCRIPTOR.services_by_name["WorkflowService"].methods
    if m.server_streaming and not m.client_streaming
]
WATCH_TIMEOUT = 3.0  # a watch of an open run lasts until its deadline: that ends it properly


@pytest.mark.parametrize("method", WATCHES, ids=lambda m: m.name)
def test_watches_get_a_proper_status(fuzz_cluster: Cluster, method: d.MethodDescriptor) -> None:
    channel = grpc.insecure_channel(fuzz_cluster.gateway)
    watch: Any = channel.unary_stream(f"/{method.containing_service.full_name}/{method.name}")

    @given(request=messages(method.input_type))
    def check(request: Message) -> None:
        try:
            list(watch(request.SerializeToString(), timeout=WATCH_TIMEOUT))
        except grpc.RpcError as error:
            code, details = error.code(), error.details()
            proper = code in PROPER or code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert proper, f"{method.full_name} answered {code.name}: {details}"
        assert_alive(fuzz_cluster)

    check()


def test_worker_streams_get_a_proper_answer_whatever_they_are_sent(fuzz_cluster: Cluster) -> None:
    """A Connect stream opened with anything, or a good hello followed by anything."""
    channel = grpc.insecure_channel(fuzz_cluster.address("scheduler"))
    connect: Any = channel.stream_stream("/perdure.api.worker.v1.TaskService/Connect")
    hello = tpb.ConnectRequest(
        hello=tpb.Hello(task_queue="fuzz-queue", workflow_types=["fuzzed"], capacity=1)
    ).SerializeToString()
    anything = frames(tpb.ConnectRequest.DESCRIPTOR)

    @given(sent=st.one_of(st.tuples(anything), st.tuples(st.just(hello), anything)))
    def check(sent: tuple[bytes, ...]) -> None:
        answers = drain(connect(iter(sent), timeout=CALL_TIMEOUT), "Connect")
        if answers:
            assert tpb.ConnectResponse.FromString(answers[0]).WhichOneof("message") == "welcome"
        assert_alive(fuzz_cluster)

    check()


def test_journal_sessions_answer_every_call_with_a_proper_status(fuzz_cluster: Cluster) -> None:
    channel = grpc.insecure_channel(fuzz_cluster.address("history"))
    session: Any = channel.stream_stream("/perdure.api.worker.v1.JournalService/Session")

    @given(sent=st.lists(frames(jpb.SessionRequest.DESCRIPTOR), min_size=1, max_size=3))
    def check(sent: list[bytes]) -> None:
        for raw in drain(session(iter(sent), timeout=CALL_TIMEOUT), "Session"):
            for answer in jpb.SessionResponse.FromString(raw).answers:
                if answer.HasField("error"):
                    code = _CODES[answer.error.code]
                    assert code in PROPER, f"a Session call answered {code.name}: {answer.error}"
        assert_alive(fuzz_cluster)

    check()


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def test_an_undecodable_request_is_refused_naming_its_type(fuzz_cluster: Cluster) -> None:
    gateway = grpc.insecure_channel(fuzz_cluster.gateway)
    start: Any = gateway.unary_unary("/perdure.api.workflow.v1.WorkflowService/StartWorkflow")
    with pytest.raises(grpc.RpcError) as caught:
        start(b"\x0a\x02\xff\xfe", timeout=CALL_TIMEOUT)  # field 1, a string, not UTF-8
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_reason(caught.value) == "INVALID_REQUEST"
    message = caught.value.details() or ""
    assert "not a valid perdure.api.workflow.v1.StartWorkflowRequest message" in message

    history = grpc.insecure_channel(fuzz_cluster.address("history"))
    session: Any = history.stream_stream("/perdure.api.worker.v1.JournalService/Session")
    with pytest.raises(grpc.RpcError) as caught:
        list(session(iter([b"\x0a\x03\x08\x96"]), timeout=CALL_TIMEOUT))  # a cut call
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid perdure.api.worker.v1.SessionRequest message" in (
        caught.value.details() or ""
    )


def test_the_fuzzed_journal_is_consistent(fuzz_cluster: Cluster) -> None:
    """After everything above: every run's events are 1..n without gaps, with one start and,
    if closed, one closing event; the outbox drains."""
    with psycopg.connect(fuzz_cluster.dsn, autocommit=True) as conn:
        gaps = conn.execute(
            """SELECT w.workflow_id, w.event_count, count(e.event_id), min(e.event_id),
                      max(e.event_id)
               FROM history.workflows w LEFT JOIN history.events e USING (workflow_id)
               GROUP BY w.workflow_id, w.event_count
               HAVING count(e.event_id) <> w.event_count OR min(e.event_id) <> 1
                   OR max(e.event_id) <> w.event_count"""
        ).fetchall()
        starts = conn.execute(
            """SELECT workflow_id FROM history.workflows w WHERE (
                   SELECT count(*) FROM history.events e WHERE e.workflow_id = w.workflow_id
                   AND e.event_type = 'WORKFLOW_STARTED' AND e.event_id = 1) <> 1"""
        ).fetchall()
        closes = conn.execute(
            """SELECT workflow_id, status FROM history.workflows w WHERE (
                   SELECT count(*) FROM history.events e WHERE e.workflow_id = w.workflow_id
                   AND e.event_type IN ('WORKFLOW_COMPLETED', 'WORKFLOW_FAILED',
                       'WORKFLOW_PARKED', 'WORKFLOW_CANCELLED', 'WORKFLOW_TERMINATED'))
               <> CASE WHEN status IN ('RUNNING', 'WAITING') THEN 0 ELSE 1 END"""
        ).fetchall()
        runs = conn.execute("SELECT count(*) FROM history.workflows").fetchone()

        def outbox_drained() -> bool:
            row = conn.execute("SELECT count(*) FROM history.outbox").fetchone()
            return row is not None and row[0] == 0

        wait_until(outbox_drained, 60, "the outbox to drain")
    assert runs is not None and runs[0] > 0  # the fuzzing reached the journal
    assert gaps == [] and starts == [] and closes == []
    assert_alive(fuzz_cluster)


TOKENS = st.one_of(
    st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=200),
    st.builds(lambda middle: f"prd_{middle}", st.text("0123456789abcdef_-xyz", max_size=80)),
)
SECURED = [("gateway", m) for m in PUBLIC] + [("history", m) for m in JOURNAL]


@pytest.mark.parametrize(("service", "method"), SECURED, ids=lambda t: getattr(t, "name", t))
def test_made_up_keys_are_unauthenticated(
    secured_cluster: Cluster, service: str, method: d.MethodDescriptor
) -> None:
    """With keys required and none made, whatever token a call carries (or none) it is refused
    UNAUTHENTICATED before its request is even looked at, or, once this address has failed
    too often, RESOURCE_EXHAUSTED before its token is even looked up."""
    channel = grpc.insecure_channel(secured_cluster.address(service))
    send: Any = channel.unary_unary(f"/{method.containing_service.full_name}/{method.name}")

    @given(request=messages(method.input_type), token=st.none() | TOKENS)
    def check(request: Message, token: str | None) -> None:
        metadata = None if token is None else (("authorization", f"Bearer {token}"),)
        with pytest.raises(grpc.RpcError) as caught:
            send(request.SerializeToString(), metadata=metadata, timeout=CALL_TIMEOUT)
        code, details = caught.value.code(), caught.value.details() or ""
        held_back = code == grpc.StatusCode.RESOURCE_EXHAUSTED and "failed auth" in details
        assert code == grpc.StatusCode.UNAUTHENTICATED or held_back, (code, details)
        assert_alive(secured_cluster)

    check()
