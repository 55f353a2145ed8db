"""Live results and streams, server side: frames emitted over the raw worker protocol (numbered,
fenced, stored once, reset after a failed attempt), ReadStream and WatchWorkflow pushed to
readers on any history replica, GetWorkflowResult woken by the close, the HTTP feeds, and
frame retention. Runs are driven by hand, as a worker in another language would."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
import requests
from google.protobuf.duration_pb2 import Duration

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.common import limits
from perdure.common.payload import MAX_PAYLOAD_BYTES
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.telemetry.rpc import MESSAGE_LIMITS
from perdure.worker._payload import from_payload, to_payload
from tests.e2e.test_http_api import Http
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.postgres import Databases
from tests.fixtures.rpc import error_reason

QUEUE = "hand-driven"
TIMEOUT = 60.0
PUSHED = 10.0  # seconds a pushed message may take at most, on a loaded machine


@pytest.fixture(scope="module")
def two_histories(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One cluster for the module with two history replicas, no worker: the runs are driven
    by hand (a registrar worker declared the types and left)."""
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, tmp_path_factory.mktemp("streams"), replicas={"history": 2})
        try:
            cluster.start_services()
            cluster.start_worker("registrar", task_queue=QUEUE).kill()
            yield cluster
        finally:
            cluster.stop()


class Driver:
    """A hand-driven worker on one history replica and a client of the gateway."""

    def __init__(self, cluster: Cluster, workflow_id: str, replica: int = 0) -> None:
        self.workflow_id = workflow_id
        self._channels = [
            grpc.insecure_channel(cluster.address("history", replica)),
            grpc.insecure_channel(cluster.gateway),
        ]
        self.journal = jgrpc.JournalServiceStub(self._channels[0])
        self.api = apigrpc.WorkflowServiceStub(self._channels[1])
        started = self.api.StartWorkflow(
            api.StartWorkflowRequest(
                workflow_type="five_steps",
                workflow_id=workflow_id,
                task_queue=QUEUE,
                input=to_payload({"ledger": "unused"}),
            ),
            timeout=TIMEOUT,
        )
        self.run_id = started.run_id

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def load(self, fence: int) -> None:
        self.journal.LoadJournal(
            jpb.LoadJournalRequest(workflow_id=self.workflow_id, fence=fence), timeout=TIMEOUT
        )

    def start_attempt(self, fence: int, attempt: int, step: str = "gen") -> None:
        self.journal.RecordStep(
            jpb.RecordStepRequest(
                workflow_id=self.workflow_id,
                fence=fence,
                step_id=step,
                step_name=step,
                position=0,
                attempt=attempt,
                attempt_started=True,
            ),
            timeout=TIMEOUT,
        )

    def fail_attempt(self, fence: int, attempt: int, step: str = "gen") -> None:
        self.journal.RecordStep(
            jpb.RecordStepRequest(
                workflow_id=self.workflow_id,
                fence=fence,
                step_id=step,
                step_name=step,
                position=0,
                attempt=attempt,
                failure=wf.Failure(type="Boom", message="the model went away"),
                retry_delay=Duration(),
            ),
            timeout=TIMEOUT,
        )

    def record_step(self, fence: int, step: str, position: int, output: Any) -> None:
        self.journal.RecordStep(
            jpb.RecordStepRequest(
                workflow_id=self.workflow_id,
                fence=fence,
                step_id=step,
                step_name=step,
                position=position,
                attempt=1,
                output=to_payload(output),
            ),
            timeout=TIMEOUT,
        )

    def emit(self, fence: int, attempt: int, first: int, *chunks: Any, step: str = "gen") -> int:
        answer = self.journal.EmitFrames(
            jpb.EmitFramesRequest(
                workflow_id=self.workflow_id,
                fence=fence,
                step_id=step,
                attempt=attempt,
                first_index=first,
                chunks=[to_payload(chunk) for chunk in chunks],
            ),
            timeout=TIMEOUT,
        )
        return int(answer.last_seq)

    def finish(self, fence: int, result: Any) -> None:
        self.journal.FinishWorkflow(
            jpb.FinishWorkflowRequest(
                workflow_id=self.workflow_id, fence=fence, result=to_payload(result)
            ),
            timeout=TIMEOUT,
        )

    def continue_as_new(self, fence: int, next_input: Any) -> None:
        self.journal.FinishWorkflow(
            jpb.FinishWorkflowRequest(
                workflow_id=self.workflow_id,
                fence=fence,
                continue_as_new=jpb.ContinueAsNew(input=to_payload(next_input)),
            ),
            timeout=TIMEOUT,
        )

    def result(self, wait: float) -> api.GetWorkflowResultResponse:
        request = api.GetWorkflowResultRequest(
            workflow_id=self.workflow_id, wait=Duration(seconds=int(wait))
        )
        answer: api.GetWorkflowResultResponse = self.api.GetWorkflowResult(
            request, timeout=wait + TIMEOUT
        )
        return answer

    def read(self, after: int = 0, follow: bool = False) -> list[api.ReadStreamResponse]:
        request = api.ReadStreamRequest(
            workflow_id=self.workflow_id, after_seq=after, follow=follow
        )
        return list(self.api.ReadStream(request, timeout=TIMEOUT))


@pytest.fixture
def driver(two_histories: Cluster, request: pytest.FixtureRequest) -> Iterator[Driver]:
    running = Driver(two_histories, request.node.name[:60])
    yield running
    running.close()


def frames_of(messages: list[api.ReadStreamResponse]) -> list[tuple[int, str, int, Any]]:
    """(seq, kind, attempt, chunk) of every frame, in the order received."""
    return [
        (
            frame.seq,
            wf.FrameKind.Name(frame.kind).removeprefix("FRAME_KIND_"),
            frame.attempt,
            from_payload(frame.data) if frame.kind == wf.FRAME_KIND_DATA else None,
        )
        for message in messages
        for frame in message.frames
    ]


def refusal(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code(), error_reason(caught.value)


def test_frames_are_numbered_stored_once_fenced_and_reset_after_a_failed_attempt(
    driver: Driver,
) -> None:
    driver.load(1)
    driver.start_attempt(1, 1)
    assert driver.emit(1, 1, 0, "Hel", "lo") == 2
    assert driver.emit(1, 1, 0, "Hel", "lo") == 2  # sent again after a broken stream
    assert driver.emit(1, 1, 1, "lo", {"tokens": 3}) == 3  # overlapping: the new chunk alone
    gap = refusal(lambda: driver.emit(1, 1, 9, "far"))
    assert gap == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")

    driver.fail_attempt(1, 1)  # the failure appends the RESET, in its own transaction
    assert frames_of(driver.read(after=3)) == [(4, "RESET", 1, None)]
    closed = refusal(lambda: driver.emit(1, 1, 3, "late"))
    assert closed == (grpc.StatusCode.FAILED_PRECONDITION, "STEP_CLOSED")
    driver.start_attempt(1, 2)
    assert driver.emit(1, 2, 0, "Hi") == 5
    # The same call on a Session stream (sent again there: stored once).
    call = jpb.JournalCall(
        id=1,
        emit_frames=jpb.EmitFramesRequest(
            workflow_id=driver.workflow_id,
            fence=1,
            step_id="gen",
            attempt=2,
            chunks=[to_payload("Hi")],
        ),
    )
    answers = driver.journal.Session(iter([jpb.SessionRequest(calls=[call])]), timeout=TIMEOUT)
    (answer,) = [a for message in answers for a in message.answers]
    assert answer.emit_frames.last_seq == 5, answer

    # A new lease fences the old holder out; its next attempt's first frame resets the lost
    # attempt 2 (whose failure nobody recorded) before its own.
    driver.load(2)
    stale = refusal(lambda: driver.emit(1, 2, 1, "stale"))
    assert stale == (grpc.StatusCode.FAILED_PRECONDITION, "STALE_FENCE")
    assert driver.emit(2, 3, 0, "Hey") == 7

    assert frames_of(driver.read()) == [
        (1, "DATA", 1, "Hel"),
        (2, "DATA", 1, "lo"),
        (3, "DATA", 1, {"tokens": 3}),
        (4, "RESET", 1, None),
        (5, "DATA", 2, "Hi"),
        (6, "RESET", 2, None),
        (7, "DATA", 3, "Hey"),
    ]
    assert [frame[0] for frame in frames_of(driver.read(after=4))] == [5, 6, 7]  # resumed

    # A followed read ends once the run closes, after every frame.
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(driver.read, 5, True)
        driver.emit(2, 3, 1, "!")
        driver.finish(2, "Hey!")
        messages = following.result(timeout=TIMEOUT)
    assert [frame[0] for frame in frames_of(messages)] == [6, 7, 8]
    assert messages[-1].end and messages[-1].status == wf.WORKFLOW_STATUS_COMPLETED
    assert refusal(lambda: driver.emit(2, 3, 2, "after"))[1] == "WORKFLOW_CLOSED"


def event_types(messages: list[api.WatchWorkflowResponse]) -> list[str]:
    return [
        wf.EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        for message in messages
        for event in message.events
    ]


def test_a_watcher_on_one_history_replica_sees_commits_made_through_another(
    driver: Driver, two_histories: Cluster
) -> None:
    # The watcher asks replica 1 itself; every write below goes to replica 0.
    received: queue.Queue[hpb.WatchWorkflowResponse] = queue.Queue()
    with grpc.insecure_channel(two_histories.address("history", 1)) as channel:
        watch = hgrpc.HistoryServiceStub(channel).WatchWorkflow(
            hpb.WatchWorkflowRequest(
                request=api.WatchWorkflowRequest(workflow_id=driver.workflow_id)
            ),
            timeout=TIMEOUT,
        )

        def read() -> None:
            for message in watch:
                received.put(message)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def next_message() -> api.WatchWorkflowResponse:
            # Well within the feed's safety re-check (15 s): only a notification is this quick.
            return received.get(timeout=PUSHED).response

        first = next_message()
        assert first.workflow.status == wf.WORKFLOW_STATUS_RUNNING
        assert event_types([first]) == ["WORKFLOW_STARTED"]
        driver.load(1)
        driver.record_step(1, "a", 0, "one")
        assert [e.step_id for e in next_message().events] == ["a"]
        driver.record_step(1, "b", 1, "two")
        assert [e.step_id for e in next_message().events] == ["b"]
        driver.finish(1, 42)
        rest = [next_message()]
        while not rest[-1].closed:
            rest.append(next_message())
        reader.join(TIMEOUT)
    assert event_types(rest) == ["WORKFLOW_COMPLETED"]
    assert any(m.workflow.status == wf.WORKFLOW_STATUS_COMPLETED for m in rest[:-1])
    assert rest[-1].closed and from_payload(rest[-1].workflow.result) == 42

    # Resumed from a cursor through the gateway: each later event once, then the close.
    resumed = list(
        driver.api.WatchWorkflow(
            api.WatchWorkflowRequest(workflow_id=driver.workflow_id, after_event_id=2),
            timeout=TIMEOUT,
        )
    )
    assert [e.event_id for m in resumed for e in m.events] == [3, 4]
    assert resumed[-1].closed and resumed[0].workflow.status == wf.WORKFLOW_STATUS_COMPLETED


def test_a_stream_is_pushed_to_readers_on_every_replica_the_same_as_it_is_stored(
    driver: Driver, two_histories: Cluster
) -> None:
    """Readers following a stream on the replica that stores its frames (handed them as they
    commit) and on another (told by a notification) each get every frame once, in order, within
    a moment of its emit, exactly as a read of the stored stream returns them; resets included
    (one in a failure's transaction, one before a new holder's first frame)."""
    received: dict[int, queue.Queue[api.ReadStreamResponse]] = {0: queue.Queue(), 1: queue.Queue()}
    channels = [grpc.insecure_channel(two_histories.address("history", i)) for i in (0, 1)]
    request = api.ReadStreamRequest(workflow_id=driver.workflow_id, follow=True)
    readers: list[threading.Thread] = []
    for replica, channel in enumerate(channels):
        stream = hgrpc.HistoryServiceStub(channel).ReadStream(
            hpb.ReadStreamRequest(request=request), timeout=TIMEOUT
        )

        def read(stream: Any = stream, into: queue.Queue[Any] = received[replica]) -> None:
            with contextlib.suppress(grpc.RpcError):  # cancelled when the test fails
                for message in stream:
                    into.put(message.response)

        readers.append(threading.Thread(target=read, daemon=True))
        readers[-1].start()

    def next_frames(replica: int, count: int) -> list[wf.StreamFrame]:
        # Well within the feed's safety re-check (15 s): only a push is this quick.
        frames: list[wf.StreamFrame] = []
        while len(frames) < count:
            frames.extend(received[replica].get(timeout=PUSHED).frames)
        assert len(frames) == count
        return frames

    try:
        for replica in (0, 1):  # the stream is open: each reader is told so first
            assert received[replica].get(timeout=PUSHED) == api.ReadStreamResponse()
        driver.load(1)
        driver.start_attempt(1, 1)
        steps: list[tuple[Callable[[], object], int]] = [
            (lambda: driver.emit(1, 1, 0, "Hel", "lo"), 2),
            (lambda: driver.emit(1, 1, 2, {"tokens": 3}), 1),
            (lambda: driver.fail_attempt(1, 1), 1),  # its RESET, in the failure's transaction
            (lambda: driver.start_attempt(1, 2), 0),
            (lambda: driver.emit(1, 2, 0, "Hi"), 1),
            (lambda: driver.load(2), 0),
            (lambda: driver.emit(2, 3, 0, "Hey", "!"), 3),  # after a RESET of the lost attempt 2
        ]
        pushed: dict[int, list[wf.StreamFrame]] = {0: [], 1: []}
        for step, count in steps:
            step()
            for replica in (0, 1):
                pushed[replica].extend(next_frames(replica, count))
        stored = [frame for message in driver.read() for frame in message.frames]
        assert [frame.seq for frame in stored] == list(range(1, 9))
        assert pushed[0] == stored and pushed[1] == stored
        driver.finish(2, "Hey!")
        for replica in (0, 1):
            assert received[replica].get(timeout=PUSHED).end
            readers[replica].join(TIMEOUT)
    finally:
        for channel in channels:
            channel.close()


def test_two_steps_streaming_at_once_reach_a_reader_once_each_in_order(driver: Driver) -> None:
    """Two steps emit to one stream at once through the same replica, which hands the frames of
    each commit to its reader: the reader gets frames 1..N in order, each once, exactly as
    stored, each step's chunks in their own order."""
    driver.load(1)
    for step in ("a", "b"):
        driver.start_attempt(1, 1, step)
    batches = 40
    with ThreadPoolExecutor(3) as pool:
        following = pool.submit(driver.read, 0, True)

        def emit_all(step: str) -> None:
            for batch in range(batches):
                driver.emit(1, 1, 2 * batch, f"{step}{batch}.", f"{step}{batch}!", step=step)

        for done in [pool.submit(emit_all, step) for step in ("a", "b")]:
            done.result(timeout=TIMEOUT)
        driver.finish(1, "done")
        messages = following.result(timeout=TIMEOUT)
    read = [frame for message in messages for frame in message.frames]
    stored = [frame for message in driver.read() for frame in message.frames]
    assert [frame.seq for frame in read] == list(range(1, 4 * batches + 1))
    assert read == stored
    for step in ("a", "b"):  # each step's chunks in its own order
        chunks = [from_payload(f.data) for f in stored if f.step_id == step]
        assert chunks == [f"{step}{b}{end}" for b in range(batches) for end in ".!"]


def test_a_result_wait_on_one_history_replica_ends_at_a_close_made_through_another(
    driver: Driver, two_histories: Cluster
) -> None:
    # The wait asks replica 1 itself; the run's records and its close go to replica 0. A wait
    # is woken by its run's status alone (a channel of its own): a step does not end it.
    driver.load(1)
    wait = api.GetWorkflowResultRequest(workflow_id=driver.workflow_id, wait=Duration(seconds=60))
    with (
        grpc.insecure_channel(two_histories.address("history", 1)) as channel,
        ThreadPoolExecutor(1) as pool,
    ):
        result = hgrpc.HistoryServiceStub(channel).GetWorkflowResult
        waiting = pool.submit(result, hpb.GetWorkflowResultRequest(request=wait), timeout=90)
        driver.record_step(1, "a", 0, "one")
        assert not waiting.done()
        driver.finish(1, 42)
        # Well within the feed's safety re-check (15 s): only a notification is this quick.
        answer = waiting.result(timeout=PUSHED).response
    assert answer.closed and from_payload(answer.workflow.result) == 42


def test_frames_past_what_one_answer_holds_reach_a_reader_on_the_storing_replica_in_pages(
    driver: Driver, two_histories: Cluster
) -> None:
    """An emit of more bytes than one answer of a stream holds (HISTORY_PAGE_BYTES, 16 MiB) is
    not handed to the storing replica's reader, which reads it in pages; a few emits that fit
    one by one but not together are capped the same way. Every frame arrives once, in order, as
    stored, no answer larger than a page."""
    chunk = "x" * (MAX_PAYLOAD_BYTES - 100)  # as JSON: a string of almost 2 MiB
    driver.load(1)
    driver.start_attempt(1, 1)
    request = hpb.ReadStreamRequest(
        request=api.ReadStreamRequest(workflow_id=driver.workflow_id, follow=True)
    )
    with (
        grpc.insecure_channel(two_histories.address("history", 0), options=MESSAGE_LIMITS) as ch,
        ThreadPoolExecutor(1) as pool,
    ):
        call = hgrpc.HistoryServiceStub(ch).ReadStream(request, timeout=TIMEOUT)
        assert next(call).response == api.ReadStreamResponse()  # open: frames are handed now
        following = pool.submit(list, call)
        assert driver.emit(1, 1, 0, *[chunk] * 9) == 9  # 18 MiB in one commit
        for batch in range(3):  # 9.5 MiB each
            driver.emit(1, 1, 9 + 5 * batch, *[chunk] * 5)
        driver.finish(1, "done")
        answers = [message.response for message in following.result(timeout=TIMEOUT)]
    # Each answer is a page's worth, as a read makes it (its budget counts each frame's data
    # and stream, and a little framing), far within the message limit.
    assert all(answer.ByteSize() <= limits.HISTORY_PAGE_BYTES + 64 * 1024 for answer in answers)
    read = [frame for answer in answers for frame in answer.frames]
    assert [frame.seq for frame in read] == list(range(1, 25))
    assert all(from_payload(frame.data) == chunk for frame in read)
    assert answers[-1].end


def test_result_waits_on_the_closing_replica_and_on_another_get_the_same_answer(
    driver: Driver, two_histories: Cluster
) -> None:
    """The replica that commits a close hands the closed run to the callers waiting there
    (they read nothing); another replica's callers read it: both answer the same, and the
    same as a read after the close."""
    driver.load(1)
    wait = api.GetWorkflowResultRequest(workflow_id=driver.workflow_id, wait=Duration(seconds=60))
    channels = [grpc.insecure_channel(two_histories.address("history", i)) for i in (0, 1)]
    try:
        with ThreadPoolExecutor(2) as pool:
            waits = [
                pool.submit(
                    hgrpc.HistoryServiceStub(channel).GetWorkflowResult,
                    hpb.GetWorkflowResultRequest(request=wait),
                    timeout=90,
                )
                for channel in channels
            ]
            # A step recorded through replica 0 after both calls were sent: neither ends them.
            # (A call that came after the close reads, and must answer the same;
            # test_commit_feed_db.py checks the hand-off itself, deterministically.)
            driver.record_step(1, "a", 0, "one")
            assert not any(waiting.done() for waiting in waits)
            driver.finish(1, {"answer": 42})
            answers = [waiting.result(timeout=PUSHED).response for waiting in waits]
    finally:
        for channel in channels:
            channel.close()
    after = driver.result(0)
    assert answers[0] == answers[1] == after
    assert answers[0].closed and from_payload(answers[0].workflow.result) == {"answer": 42}


def test_a_result_wait_ends_at_the_close_and_follows_continue_as_new(driver: Driver) -> None:
    assert not driver.result(0).closed  # no wait: answered at once, still running
    driver.load(1)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(driver.result, 60)
        driver.continue_as_new(1, {"round": 2})
        next_run = driver.api.DescribeWorkflow(
            api.DescribeWorkflowRequest(workflow_id=driver.workflow_id), timeout=TIMEOUT
        ).workflow
        assert next_run.run_id != driver.run_id and not waiting.done()
        driver.load(next_run.fence + 1)
        driver.finish(next_run.fence + 1, "done")
        answer = waiting.result(timeout=PUSHED)  # long before its 60 s ran out
    assert answer.closed and answer.workflow.run_id == next_run.run_id
    assert from_payload(answer.workflow.result) == "done"
    with pytest.raises(grpc.RpcError) as caught:
        driver.result(301)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_http_stream_feed_resumes_after_the_last_event_id_and_the_result_waits(
    driver: Driver, two_histories: Cluster
) -> None:
    http = Http(two_histories.http_address)
    path = f"/v1/workflows/{driver.workflow_id}"
    driver.load(1)
    driver.start_attempt(1, 1)
    driver.emit(1, 1, 0, "a", "b", "c")
    stored = list(http.feed(f"{path}/streams/output?follow=false"))
    assert [(ident, event, frame["data"]) for ident, event, frame in stored] == [
        ("1", "frame", "a"),
        ("2", "frame", "b"),
        ("3", "frame", "c"),
    ]
    assert stored[0][2]["kind"] == "FRAME_KIND_DATA" and stored[0][2]["step_id"] == "gen"

    # A stream with no frame yet answers at once (a browser shows the feed as open, not as
    # reconnecting, while a run waits before its first frame).
    with requests.get(
        f"{http.base}{path}/streams/quiet", headers=http.headers, stream=True, timeout=PUSHED
    ) as quiet:
        assert quiet.status_code == 200
        assert quiet.headers["Content-Type"] == "text/event-stream"

    following = http.feed(f"{path}/streams/output", **{"Last-Event-ID": "2"})
    assert next(following)[:2] == ("3", "frame")  # the run is open: the feed stays open
    watching = http.feed(f"{path}/events")
    assert next(watching)[:2] == ("1", "history")
    waiting = http.ok("GET", f"{path}/result", params={"wait": "0"})
    assert waiting["closed"] is False and waiting["workflow"]["status"] == "WORKFLOW_STATUS_RUNNING"
    driver.emit(1, 1, 3, "d")
    driver.record_step(1, "gen", 0, "abcd")
    driver.finish(1, "abcd")
    rest = list(following)
    assert rest == [
        ("4", "frame", rest[0][2]),
        ("", "end", {"status": "WORKFLOW_STATUS_COMPLETED"}),
    ]
    assert rest[0][2]["data"] == "d" and rest[0][2]["seq"] == "4"

    result = http.ok("GET", f"{path}/result", params={"wait": "60"})
    assert result["closed"] is True and result["workflow"]["result"] == "abcd"
    events = list(watching)  # the status change, pushed, after the events that made it
    assert [event for _, event, _ in events] == ["history"] * (len(events) - 2) + ["status", "end"]
    assert events[-2][2]["status"] == "WORKFLOW_STATUS_COMPLETED"
    assert events[-2][2]["workflow"]["result"] == "abcd"
    assert events[-1] == ("", "end", {"status": "WORKFLOW_STATUS_COMPLETED"})
    assert http.error(400, "GET", f"{path}/result", params={"wait": "soon"})["reason"] == (
        "INVALID_JSON"
    )
    assert http.error(400, "GET", f"{path}/result", params={"wait": "301"})["reason"] == (
        "INVALID_REQUEST"
    )
    # Past what a protobuf Duration holds, still a clear 400 (it was a 500).
    huge = http.error(400, "GET", f"{path}/result", params={"wait": "1" + "0" * 30})
    assert huge["reason"] == "INVALID_JSON" and "0 to 300" in huge["message"]
    assert http.error(404, "GET", "/v1/workflows/nobody/streams/output")["reason"] == (
        "WORKFLOW_NOT_FOUND"
    )


def test_the_frames_of_a_run_closed_longer_than_the_retention_are_deleted(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(PERDURE_STREAM_RETENTION="1")
    cluster.start_worker("registrar", task_queue=QUEUE).kill()
    driver = Driver(cluster, "kept-briefly")
    try:
        driver.load(1)
        driver.start_attempt(1, 1)
        driver.emit(1, 1, 0, "soon", "gone")
        assert len(frames_of(driver.read())) == 2  # kept while the run is open
        driver.finish(1, "done")
        wait_until(lambda: not frames_of(driver.read()), TIMEOUT, "the sweep to delete frames")
        history = driver.api.GetWorkflowHistory(
            api.GetWorkflowHistoryRequest(workflow_id=driver.workflow_id), timeout=TIMEOUT
        )
        assert history.events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_COMPLETED  # journal kept
    finally:
        driver.close()


def test_a_remote_step_emits_under_its_own_lease(driver: Driver) -> None:
    journal, workflow_id = driver.journal, driver.workflow_id
    driver.load(1)
    journal.ScheduleStep(
        jpb.ScheduleStepRequest(
            workflow_id=workflow_id,
            fence=1,
            step_id="far",
            step_name="far",
            position=0,
            task_queue=QUEUE,
            input=to_payload(None),
        ),
        timeout=TIMEOUT,
    )

    def emit(fence: int, attempt: int, *chunks: str) -> int:
        request = jpb.EmitFramesRequest(
            workflow_id=workflow_id,
            fence=fence,
            step_id="far",
            attempt=attempt,
            stream="notes",
            chunks=[to_payload(chunk) for chunk in chunks],
            step_task=True,
        )
        return int(journal.EmitFrames(request, timeout=TIMEOUT).last_seq)

    assert (
        journal.LoadStep(
            jpb.LoadStepRequest(workflow_id=workflow_id, step_id="far", fence=1), timeout=TIMEOUT
        ).attempt
        == 1
    )
    assert emit(1, 1, "one") == 1
    journal.RecordStep(
        jpb.RecordStepRequest(
            workflow_id=workflow_id,
            fence=1,
            step_id="far",
            attempt=1,
            failure=wf.Failure(type="Boom", message="again"),
            retry_delay=Duration(),
            step_task=True,
        ),
        timeout=TIMEOUT,
    )
    assert (
        journal.LoadStep(
            jpb.LoadStepRequest(workflow_id=workflow_id, step_id="far", fence=2), timeout=TIMEOUT
        ).attempt
        == 2
    )
    assert refusal(lambda: emit(1, 1, "late"))[1] == "STALE_FENCE"  # the step's own lease
    assert emit(2, 2, "two") == 3
    read = api.ReadStreamRequest(workflow_id=workflow_id, stream="notes")
    frames = frames_of(list(driver.api.ReadStream(read, timeout=TIMEOUT)))
    assert frames == [(1, "DATA", 1, "one"), (2, "RESET", 1, None), (3, "DATA", 2, "two")]
    assert driver.read() == []  # the default stream holds nothing
