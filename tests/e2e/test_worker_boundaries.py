"""What a worker may do is bounded by what it holds: a lease only by the session it was granted
to, signals only once and only its run's, streams only up to a cap per key, and what it says
about itself reaches the logs only as printable text. Real services, real keys, raw gRPC."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.common.auth import bearer_metadata
from perdure.common.lease_proofs import PROOF_BYTES
from perdure.worker._payload import from_payload, to_payload
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.ledger import ledger_lines
from tests.fixtures.rpc import error_reason
from tests.fixtures.worker_streams import HeldStream, connect, hello, task_row

WAIT = 60.0


@pytest.fixture
def secured(start_cluster: Callable[..., Cluster]) -> Cluster:
    return start_cluster(PERDURE_AUTH="on")


def intrude(
    cluster: Cluster, key: str, first: tpb.ConnectRequest, lease: tpb.LeaseRef
) -> list[Any]:
    """Open a session of `key` and send, about `lease`, all a worker can say of a lease: hand
    it back, report it done, renew it; then renew a lease of a run that never existed. Return
    the scheduler's answers, up to its answer to the last heartbeat."""
    nobody = tpb.LeaseRef(workflow_id="no-such-run", fence=lease.fence)
    with grpc.insecure_channel(cluster.address("scheduler")) as channel:
        stream = connect(channel, first, key)
        for message in (
            tpb.ConnectRequest(task_done=tpb.TaskDone(lease=lease, unfinished=True)),
            tpb.ConnectRequest(task_done=tpb.TaskDone(lease=lease)),
            tpb.ConnectRequest(heartbeat=tpb.Heartbeat(leases=[lease])),
            tpb.ConnectRequest(heartbeat=tpb.Heartbeat(leases=[nobody])),
        ):
            stream.send(message)
        answers: list[Any] = []
        while not answers or answers[-1].lease_revoked.lease.workflow_id != nobody.workflow_id:
            answers.append(stream.receive())  # the scheduler handles messages in order
        stream.close()
    return answers


@contextmanager
def driven_by_hand(
    cluster: Cluster, holder: str, workflow_id: str, task_queue: str
) -> Iterator[tuple[jgrpc.JournalServiceStub, HeldStream]]:
    """A `five_steps` run started on a queue that only a session of `holder` this test drives
    serves: the journal's stub and that session, which receives the run's tasks."""
    with (
        grpc.insecure_channel(cluster.address("scheduler")) as scheduler,
        grpc.insecure_channel(cluster.address("history")) as history,
        Client(cluster.gateway, api_key=make_key(cluster, "default", "operator")) as client,
    ):
        session = connect(scheduler, hello(task_queue, workflow_type="five_steps"), holder)
        client.start_workflow(
            "five_steps", {"ledger": "-"}, workflow_id=workflow_id, task_queue=task_queue
        )
        yield jgrpc.JournalServiceStub(history), session


def refusal(call: Callable[..., Any], request: Any, key: str) -> tuple[str, str]:
    """The reason and message of a journal call that must be refused as PERMISSION_DENIED."""
    with pytest.raises(grpc.RpcError) as caught:
        call(request, metadata=bearer_metadata(key), timeout=30)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value.details()
    return error_reason(caught.value), str(caught.value.details())


def journal_probes(workflow_id: str, fence: int) -> list[tuple[str, Any]]:
    """A load, a later page, a payload fetch and every kind of write naming one lease:
    (method, request)."""
    lease: dict[str, Any] = {"workflow_id": workflow_id, "fence": fence}
    call: dict[str, Any] = {**lease, "step_id": "x", "step_name": "x", "position": 9}
    state = jpb.SetStateRequest(**call, key="phase")
    state.value.CopyFrom(to_payload("hijacked"))
    finish = jpb.FinishWorkflowRequest(**lease)
    finish.result.CopyFrom(to_payload("hijacked"))
    nothing = to_payload(None)
    return [
        ("LoadJournal", jpb.LoadJournalRequest(**lease)),
        ("SetState", state),
        ("RecordPatch", jpb.RecordPatchRequest(**lease, patch_id="hijack", position=9)),
        ("ConsumeSignals", jpb.ConsumeSignalsRequest(**call, signal_name="go", result=nothing)),
        ("RecordHeartbeat", jpb.RecordHeartbeatRequest(**lease, step_id="x", attempt=1)),
        ("EmitFrames", jpb.EmitFramesRequest(**lease, step_id="x", attempt=1, chunks=[nothing])),
        ("FinishWorkflow", finish),
        ("LoadJournal", jpb.LoadJournalRequest(**lease, after_event_id=1, later_page=True)),
        ("LoadPayload", jpb.LoadPayloadRequest(**lease, sha256=bytes(32))),
    ]


def test_a_worker_key_cannot_end_renew_or_report_on_a_lease_it_does_not_hold(
    secured: Cluster, tmp_path: Path
) -> None:
    """Sessions of another queue's key, of the holder's own key on another queue, and of the
    holder's own key on its queue: none of them can hand back, finish, renew or adopt the
    holder's lease. The holder works on, its step runs once, the run completes under the fence
    it was granted; and the answers are the same as for a lease that never existed."""
    any_queue = make_key(secured, "default", "worker", "*")
    q1_only = make_key(secured, "default", "worker", "q1")
    secured.start_worker("holder", PERDURE_API_KEY=any_queue)
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    with Client(secured.gateway, api_key=make_key(secured, "default", "operator")) as client:
        client.start_workflow(
            "blocks_in_third", {"ledger": str(ledger), "gate": str(gate)}, workflow_id="held"
        )
        wait_until(lambda: any("step_3" in line for line in ledger_lines(ledger)), WAIT, "step 3")
        fence = client.describe("held").workflow.fence
        lease = tpb.LeaseRef(workflow_id="held", fence=fence)
        before = task_row(secured, "held")

        answers = [
            *intrude(secured, q1_only, hello("q1", lease), lease),  # another key and queue
            *intrude(secured, any_queue, hello("q1", lease), lease),  # its key, another queue
            *intrude(secured, any_queue, hello("default"), lease),  # its key and queue
        ]

        assert task_row(secured, "held") == before  # same fence, holder, no new due time
        assert all(answer.HasField("lease_revoked") for answer in answers), answers
        revoked = [answer.lease_revoked for answer in answers]
        # The adoptions asked in two hellos, and every heartbeat, refused: with one reason, the
        # one given for a run that does not exist.
        assert [r.lease.workflow_id for r in revoked] == ["held", "held", "no-such-run"] * 2 + [
            "held",
            "no-such-run",
        ]
        assert {r.lease.fence for r in revoked} == {fence}
        assert len({r.reason for r in revoked}) == 1

        gate.touch()
        described = client.wait("held", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    assert from_payload(described.workflow.result)["fence"] == fence
    started = [line for line in ledger_lines(ledger) if line.startswith("start step_3 ")]
    assert len(started) == 1, ledger_lines(ledger)  # the step in flight never ran a second time


def test_history_tells_a_key_that_holds_no_lease_nothing_and_the_holder_why(
    secured: Cluster,
) -> None:
    """A run at fence 2, driven by hand under a worker key: another key gets one answer, the
    answer for a run that does not exist, whether its fence is stale, current or never
    loaded, and whether the run is open or closed. The holder's key gets the diagnosis."""
    holder = make_key(secured, "default", "worker", "*")
    q1_only = make_key(secured, "default", "worker", "q1")
    with driven_by_hand(secured, holder, "r", "hand") as (journal, session):
        for fence in (1, 2):  # taken up, handed back, granted again
            task = session.receive().task
            assert (task.workflow_id, task.fence) == ("r", fence)
            load = jpb.LoadJournalRequest(workflow_id="r", fence=fence)
            journal.LoadJournal(load, metadata=bearer_metadata(holder), timeout=30)
            lease = tpb.LeaseRef(workflow_id="r", fence=fence)
            if fence == 1:
                session.send(
                    tpb.ConnectRequest(task_done=tpb.TaskDone(lease=lease, unfinished=True))
                )

        def assert_told_nothing() -> None:
            for claimed in (1, 2, 3):  # stale, current, never loaded
                probes = zip(
                    journal_probes("r", claimed),
                    journal_probes("no-such-run", claimed),
                    strict=True,
                )
                for (method, request), (_, unknown) in probes:
                    call = getattr(journal, method)
                    reason, message = refusal(call, request, q1_only)
                    assert reason == "LEASE_NOT_HELD", (method, message)
                    as_unknown = message.replace("workflow r ", "workflow no-such-run ")
                    assert (reason, as_unknown) == refusal(call, unknown, q1_only), method
                    assert f"fence {claimed}:" in message, message

        def holder_told(fence: int) -> tuple[str, str]:
            (_, request) = journal_probes("r", fence)[1]  # SetState
            with pytest.raises(grpc.RpcError) as caught:
                journal.SetState(request, metadata=bearer_metadata(holder), timeout=30)
            return error_reason(caught.value), str(caught.value.details())

        assert_told_nothing()
        assert holder_told(1) == (
            "STALE_FENCE",
            "stale fence 1 for workflow r: a newer lease (fence 2) owns it; stop working on it",
        )
        assert holder_told(3)[0] == "FENCE_NOT_LOADED"

        finish = jpb.FinishWorkflowRequest(workflow_id="r", fence=2)
        finish.result.CopyFrom(to_payload("done"))
        journal.FinishWorkflow(finish, metadata=bearer_metadata(holder), timeout=30)
        assert_told_nothing()  # a closed run, alike
        assert holder_told(2)[0] == "WORKFLOW_CLOSED"
        session.close()


# --- signals ---------------------------------------------------------------------------------


@pytest.fixture
def journal(cluster: Cluster) -> Iterator[jgrpc.JournalServiceStub]:
    """Two runs on a queue whose only worker has left, each with signals, and a raw journal stub
    to drive them: "mine" (signals at events 2 and 3) and "theirs" (signals at 2, 3 and 4)."""
    cluster.start_worker("registrar", task_queue="hand-driven").kill()  # its types stay
    with cluster.client() as client:
        for run, signals in (("mine", 2), ("theirs", 3)):
            client.start_workflow(
                "five_steps", {"ledger": "unused"}, workflow_id=run, task_queue="hand-driven"
            )
            for number in range(signals):
                client.signal(run, "go", {"n": number})
    with grpc.insecure_channel(cluster.address("history")) as channel:
        stub = jgrpc.JournalServiceStub(channel)
        stub.LoadJournal(jpb.LoadJournalRequest(workflow_id="mine", fence=1), timeout=30)
        yield stub


def consume(position: int, *event_ids: int) -> jpb.ConsumeSignalsRequest:
    step_id = "$signal:go" if position == 0 else f"$signal:go#{position + 1}"
    request = jpb.ConsumeSignalsRequest(
        workflow_id="mine",
        fence=1,
        step_id=step_id,
        step_name="$signal:go",
        position=position,
        signal_name="go",
        event_ids=list(event_ids),
    )
    request.result.CopyFrom(to_payload(f"took {list(event_ids)}"))
    return request


def refused_consumption(journal: jgrpc.JournalServiceStub, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        journal.ConsumeSignals(request, timeout=30)
    return caught.value


def consumptions(journal: jgrpc.JournalServiceStub) -> list[tuple[int, list[int]]]:
    """The run's SIGNAL_CONSUMED events: (event id, the signal event ids each took)."""
    events = journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="mine", fence=1)).events
    return [
        (e.event_id, list(e.consumed_event_ids))
        for e in events
        if e.event_type == wf.EVENT_TYPE_SIGNAL_CONSUMED
    ]


def pending(cluster: Cluster) -> list[int]:
    with cluster.client() as client:
        return [s.event_id for s in client.describe("mine").pending_signals]


def test_a_grants_proof_takes_its_lease_up_without_the_scheduler_for_its_key_alone(
    secured: Cluster,
) -> None:
    """The scheduler signs each grant for the key it goes to (Task.lease_proof), and history
    takes that proof instead of asking the scheduler whether the key holds the lease: with the
    scheduler frozen (SIGSTOP), the holder's load with its proof is answered, and a load whose
    proof was altered waits on the scheduler, answered once it is back. Another key presenting
    the holder's proof is refused as a key that holds no lease."""
    holder = make_key(secured, "default", "worker", "*")
    other = make_key(secured, "default", "worker", "*")
    frozen = next(process for process in secured.processes if process.name == "scheduler")
    with driven_by_hand(secured, holder, "p", "proof") as (journal, session):
        task = session.receive().task
        assert (task.workflow_id, len(task.lease_proof)) == ("p", PROOF_BYTES)

        def load(proof: bytes) -> jpb.LoadJournalRequest:
            return jpb.LoadJournalRequest(workflow_id="p", fence=task.fence, lease_proof=proof)

        assert refusal(journal.LoadJournal, load(task.lease_proof), other)[0] == "LEASE_NOT_HELD"
        altered = bytes([*task.lease_proof[:-1], task.lease_proof[-1] ^ 1])
        frozen.signal(signal.SIGSTOP)
        try:
            loaded = journal.LoadJournal(
                load(task.lease_proof), metadata=bearer_metadata(holder), timeout=30
            )
            assert loaded.workflow.workflow_type == "five_steps"
            with pytest.raises(grpc.RpcError) as caught:
                journal.LoadJournal(load(altered), metadata=bearer_metadata(holder), timeout=3)
            assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # asking it
        finally:
            frozen.signal(signal.SIGCONT)
        again = journal.LoadJournal(load(altered), metadata=bearer_metadata(holder), timeout=30)
        assert again.workflow.workflow_type == "five_steps"  # the scheduler said so
        session.close()


def test_a_grants_proof_is_not_taken_past_its_expiry(secured: Cluster) -> None:
    """A proof says the lease was granted until its first expiry, not that it is held now:
    past that moment history no longer takes it (it asks the scheduler, frozen here), and the
    scheduler, back, refuses the lease that lapsed while nobody renewed it."""
    holder = make_key(secured, "default", "worker", "*")
    frozen = next(process for process in secured.processes if process.name == "scheduler")
    with driven_by_hand(secured, holder, "p-expiry", "proof-expiry") as (journal, session):
        task = session.receive().task
        expires = int.from_bytes(task.lease_proof[:8], "big") / 1000  # then its MAC
        load = jpb.LoadJournalRequest(
            workflow_id="p-expiry", fence=task.fence, lease_proof=task.lease_proof
        )
        frozen.signal(signal.SIGSTOP)
        try:
            journal.LoadJournal(load, metadata=bearer_metadata(holder), timeout=30)  # taken
            time.sleep(max(expires - time.time(), 0) + 0.1)  # the lease's first expiry passes
            with pytest.raises(grpc.RpcError) as caught:
                journal.LoadJournal(load, metadata=bearer_metadata(holder), timeout=3)
            assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # asking it
        finally:
            frozen.signal(signal.SIGCONT)
        assert refusal(journal.LoadJournal, load, holder)[0] == "LEASE_NOT_HELD"
        session.close()


def test_history_marks_only_the_runs_own_unconsumed_signals_each_once(
    cluster: Cluster, journal: jgrpc.JournalServiceStub
) -> None:
    assert pending(cluster) == [2, 3]
    forged = {
        "another run's event id": consume(0, 4),
        "an event that is no signal": consume(0, 1),
        "an id twice": consume(0, 2, 2),
        "a good id with a bad one": consume(0, 2, 4),
    }
    for what, request in forged.items():
        error = refused_consumption(journal, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (what, error.details())
        assert "event_ids" in str(error.details()), what
    assert (pending(cluster), consumptions(journal)) == ([2, 3], [])  # nothing marked

    first = journal.ConsumeSignals(consume(0, 2), timeout=30)
    again = journal.ConsumeSignals(consume(0, 2), timeout=30)  # its answer was lost: sent again
    assert first == again
    assert consumptions(journal) == [(4, [2])]

    taken = refused_consumption(journal, consume(1, 2, 3))  # 2 is consumed already
    assert taken.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_reason(taken) == "SIGNAL_ALREADY_CONSUMED"
    assert "2" in str(taken.details()) and pending(cluster) == [3]  # 3 was not marked

    # Writers racing for one signal at different calls: exactly one takes it.
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [
            pool.submit(journal.ConsumeSignals, consume(position, 3), timeout=30)
            for position in range(1, 7)
        ]
        outcomes = [future.exception() for future in futures]
    assert sum(outcome is None for outcome in outcomes) == 1, outcomes
    for outcome in outcomes:
        assert outcome is None or error_reason(outcome) in (  # type: ignore[arg-type]
            "SIGNAL_ALREADY_CONSUMED",
            "STEP_CONFLICT",
        )
    assert [ids for _, ids in consumptions(journal)] == [[2], [3]]
    assert pending(cluster) == []


# --- sessions per key ------------------------------------------------------------------------


def test_each_key_holds_at_most_the_cap_of_worker_streams(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(PERDURE_AUTH="on", PERDURE_SESSIONS_PER_KEY="2")
    key, other_key = (make_key(cluster, "default", "worker", "*") for _ in range(2))
    scheduler = grpc.insecure_channel(cluster.address("scheduler"))
    history = grpc.insecure_channel(cluster.address("history"))

    def session() -> HeldStream:
        return connect(scheduler, hello("default"), key)

    def journal_stream() -> HeldStream:
        """A journal stream that answered a call (so history has taken it)."""
        probe = jpb.JournalCall(
            id=1, load_journal=jpb.LoadJournalRequest(workflow_id="nothing", fence=1)
        )
        stream = HeldStream(
            jgrpc.JournalServiceStub(history).Session, jpb.SessionRequest(calls=[probe]), key=key
        )
        assert [answer.id for answer in stream.first().answers] == [1]
        return stream

    try:
        for open_one, name in ((session, "TaskService.Connect"), (journal_stream, "Session")):
            held = [open_one(), open_one()]
            with pytest.raises(grpc.RpcError) as caught:
                open_one()
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert error_reason(caught.value) == "SESSIONS_PER_KEY_EXCEEDED"
            message = str(caught.value.details())
            assert name in message and "PERDURE_SESSIONS_PER_KEY=2" in message, message
            # Another key has streams of its own.
            connect(scheduler, hello("default"), other_key).close()
            # Closing one frees its slot (once the service has seen it close).
            held.pop().close()
            held.append(retry_until_open(open_one))
            for stream in held:
                stream.close()
    finally:
        scheduler.close()
        history.close()


def retry_until_open(open_one: Callable[[], HeldStream]) -> HeldStream:
    opened: list[HeldStream] = []

    def attempt() -> bool:
        try:
            opened.append(open_one())
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            return False
        return True

    wait_until(attempt, WAIT, "a freed slot", interval=0.1)
    return opened[0]


# --- logs ------------------------------------------------------------------------------------


def test_a_workers_identity_reaches_the_log_as_one_printable_line(cluster: Cluster) -> None:
    forged = "evil\n2030-01-01 00:00:00,000 INFO perdure-scheduler auth: admin logged in\x1b[2K"
    (scheduler,) = [p for p in cluster.processes if p.name == "scheduler"]
    with grpc.insecure_channel(cluster.address("scheduler")) as channel:
        stream = connect(channel, hello("default", identity=forged + "x" * 500))
        wait_until(lambda: "worker evil" in scheduler.output(), WAIT, "the session's log line")
        stream.close()
    log = scheduler.output()
    (line,) = [line for line in log.splitlines() if "worker evil" in line]
    assert "evil\\n2030-01-01 00:00:00,000 INFO perdure-scheduler auth: admin" in line
    assert "\\x1b[2K" in line and "\x1b" not in log
    assert not re.search(r"^2030-01-01", log, re.MULTILINE)  # no forged line of its own
    assert "x" * 300 not in line and "\u2026" in line  # cut short, and marked so
