"""Token streams under fire: a step streams text slowly (tests.chaos.workflows.streaming_run)
while readers, through both gateways, cancel their ReadStream at random points and resume
from the last frame they saw. The worker running the step is killed (SIGKILL) mid-stream, and
in a second run stopped (SIGSTOP) until its lease has expired and the step has run again
elsewhere, then continued. Every reader must see frames 1, 2, 3... once each, the reset of
the lost attempt before the next attempt's frames, no frame of the stale worker after that
reset, and text equal to the final attempt's."""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.chaos.harness import WORKERS, ChaosCluster
from tests.fixtures.frames import rendered, seqs_are_gapless

STEP = "speak"
WAIT_SECONDS = 120.0
REFUSED = f"frames of step {STEP} attempt 1 refused"


@dataclass
class Reader:
    """One client following the run's stream, cutting its call at random points."""

    gateway: str
    workflow_id: str
    rng: random.Random
    frames: list[wf.StreamFrame] = field(default_factory=list)
    calls: int = 0
    ended: int = wf.WORKFLOW_STATUS_UNSPECIFIED
    error: BaseException | None = None

    def read(self) -> None:
        """Follow the stream to its end: each call takes 1 to 12 messages, then is cancelled
        and the next resumes after the last frame seen."""
        try:
            with grpc.insecure_channel(self.gateway) as channel:
                stub = apigrpc.WorkflowServiceStub(channel)
                while not self.ended:
                    self._call(stub, self.rng.randint(1, 12))
                    time.sleep(self.rng.uniform(0.0, 0.2))
        except BaseException as error:  # reported by the scenario
            self.error = error

    def _call(self, stub: apigrpc.WorkflowServiceStub, messages: int) -> None:
        self.calls += 1
        after = self.frames[-1].seq if self.frames else 0
        request = api.ReadStreamRequest(workflow_id=self.workflow_id, after_seq=after, follow=True)
        call = stub.ReadStream(request, timeout=WAIT_SECONDS)
        try:
            for message in call:
                self.frames.extend(message.frames)
                if message.end:
                    self.ended = message.status
                    return
                messages -= 1
                if messages == 0:
                    call.cancel()  # a client that goes away mid-stream
                    return
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                raise


@dataclass
class StreamRun:
    """A streaming run and its readers."""

    cluster: ChaosCluster
    workflow_id: str
    readers: list[Reader]
    threads: list[threading.Thread] = field(default_factory=list)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT_SECONDS)

    def problems(self, final_text: str, stale_attempt: int = 1) -> list[str]:
        """What each reader saw wrong."""
        found = []
        for index, reader in enumerate(self.readers):
            name = f"{self.workflow_id} reader {index}"
            frames = reader.frames
            if reader.error is not None:
                found.append(f"{name} failed: {reader.error!r}")
                continue
            if not seqs_are_gapless(frames):
                seqs = [f.seq for f in frames]
                found.append(f"{name}: seqs not 1..N once each: {_gaps(seqs)}")
            resets = [i for i, f in enumerate(frames) if f.kind == wf.FRAME_KIND_RESET]
            later = [f for f in frames if f.kind == wf.FRAME_KIND_DATA and f.attempt > 1]
            if not resets or frames[resets[0]].attempt != stale_attempt:
                found.append(f"{name}: no reset of attempt {stale_attempt}")
            elif later and frames.index(later[0]) < resets[0]:
                found.append(f"{name}: attempt 2's frames came before the reset")
            elif any(f.attempt == stale_attempt for f in frames[resets[0] + 1 :]):
                found.append(f"{name}: a frame of attempt {stale_attempt} after its reset")
            if rendered(frames) != final_text:
                found.append(f"{name}: the text is not the final attempt's")
            if reader.ended != wf.WORKFLOW_STATUS_COMPLETED:
                found.append(f"{name}: the stream did not end with the run")
        return found


def _gaps(seqs: list[int]) -> str:
    wrong = [(a, b) for a, b in itertools.pairwise(seqs) if b != a + 1]
    return f"first {seqs[:1]}, {len(wrong)} breaks, e.g. {wrong[:3]}"


def start_streaming(
    cluster: ChaosCluster, rng: random.Random, chunks: int, pause: float, readers: int
) -> StreamRun:
    """Start a streaming run and its readers (alternating between the gateways)."""
    workflow_id = f"stream-{uuid.uuid4().hex[:12]}"
    with Client(cluster.gateways[0], timeout=10) as client:
        client.start_workflow(
            "streaming_run", {"chunks": chunks, "pause": pause}, workflow_id=workflow_id
        )
    run = StreamRun(
        cluster,
        workflow_id,
        [
            Reader(
                cluster.gateways[i % len(cluster.gateways)],
                workflow_id,
                random.Random(rng.random()),
            )
            for i in range(readers)
        ],
    )
    for reader in run.readers:
        thread = threading.Thread(target=reader.read, name=f"reader-{workflow_id}", daemon=True)
        thread.start()
        run.threads.append(thread)
    return run


def worker_running_attempt(cluster: ChaosCluster, workflow_id: str, attempt: int) -> str:
    """The worker running the step's `attempt`, once its body has started."""
    pids = {m.current.popen.pid: name for name, m in cluster.members.items() if name in WORKERS}
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        with cluster.connect() as conn:
            rows = conn.execute(
                "SELECT pid FROM chaos.executions WHERE workflow_id = %s AND step = %s ORDER BY at",
                [workflow_id, STEP],
            ).fetchall()
        if len(rows) >= attempt and rows[attempt - 1][0] in pids:
            return pids[rows[attempt - 1][0]]
        time.sleep(0.05)
    raise TimeoutError(f"attempt {attempt} of {workflow_id} did not start")


def wait_for_frames(run: StreamRun, count: int) -> None:
    """Until the first reader has seen `count` frames."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(run.readers[0].frames) < count:
        if time.monotonic() > deadline or run.readers[0].error is not None:
            raise TimeoutError(f"{run.workflow_id}: {count} frames not seen")
        time.sleep(0.02)


def final_text(cluster: ChaosCluster, workflow_id: str) -> str:
    """The run's result: the final attempt's text."""
    with Client(cluster.gateways[0], timeout=10) as client:
        described = client.wait(workflow_id, timeout=WAIT_SECONDS)
    if described.workflow.status != wf.WORKFLOW_STATUS_COMPLETED:
        raise AssertionError(f"{workflow_id} did not complete: {described.workflow}")
    text: str = from_payload(described.workflow.result)
    return text


def killed_mid_stream(
    cluster: ChaosCluster, rng: random.Random, chunks: int, pause: float, readers: int
) -> list[str]:
    """SIGKILL the worker streaming attempt 1; attempt 2 runs on another one."""
    run = start_streaming(cluster, rng, chunks, pause, readers)
    wait_for_frames(run, rng.randint(chunks // 10, chunks // 3))
    victim = worker_running_attempt(cluster, run.workflow_id, 1)
    cluster.kill(victim)
    text = final_text(cluster, run.workflow_id)
    run.join()
    cluster.restart(victim)
    problems = run.problems(text)
    if not text.startswith("2:0 "):
        problems.append(f"{run.workflow_id}: the result is not attempt 2's")
    return problems


def stale_worker_resumed(
    cluster: ChaosCluster, rng: random.Random, chunks: int, pause: float, readers: int
) -> list[str]:
    """SIGSTOP the worker streaming attempt 1 until the step has run again elsewhere, then
    SIGCONT it: its body goes on emitting, and history refuses every frame it sends."""
    run = start_streaming(cluster, rng, chunks, pause, readers)
    wait_for_frames(run, rng.randint(chunks // 10, chunks // 3))
    stale = worker_running_attempt(cluster, run.workflow_id, 1)
    refused_before = cluster.members[stale].output().count(REFUSED)
    cluster.pause(stale)
    try:
        text = final_text(cluster, run.workflow_id)
    finally:
        cluster.resume(stale)
    run.join()
    problems = run.problems(text)
    deadline = time.monotonic() + WAIT_SECONDS / 4
    while cluster.members[stale].output().count(REFUSED) == refused_before:
        if time.monotonic() > deadline:
            problems.append(f"{stale}, continued, sent no frame that was refused")
            break
        time.sleep(0.05)
    # Read once more, after the stale worker went on: nothing of it was stored.
    late = Reader(cluster.gateways[1], run.workflow_id, random.Random(rng.random()))
    late.read()
    return problems + StreamRun(cluster, run.workflow_id, [late]).problems(text)
