"""The push path's shapes: how soon a client gets a run's result (GetWorkflowResult, a long
poll woken by the commit), how soon a reader following a stream (ReadStream) gets a frame a
step emitted, and how many frames per second one step streams to one reader."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration

from bench.cluster import Cluster
from bench.shapes import TIMEOUT, Progress
from bench.stats import summary_ms
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import from_payload, to_payload
from perdure.telemetry.rpc import sync_channel
from perdure.worker._rpc import CHANNEL_OPTIONS

RESULT_TARGET_MS = 2.0
FIRST_FRAME_TARGET_MS = 5.0
FRAMES_PER_S_TARGET = 5000.0
FRAME_GAP = 0.02  # between the paced frames: each is a batch of its own, measured alone


class _Stub:
    """The gateway's WorkflowService over a channel of its own, with the bench's key."""

    def __init__(self, cluster: Cluster) -> None:
        self._channel = sync_channel(cluster.gateway, CHANNEL_OPTIONS, api_key=cluster.client_key)
        self.stub = apigrpc.WorkflowServiceStub(self._channel)

    def start(self, workflow_type: str, workflow_id: str, value: Any) -> None:
        self.stub.StartWorkflow(
            api.StartWorkflowRequest(
                workflow_type=workflow_type, workflow_id=workflow_id, input=to_payload(value)
            ),
            timeout=TIMEOUT,
        )

    def result(self, workflow_id: str) -> wf.WorkflowInfo:
        """Wait for the run's result (one long poll)."""
        wait = Duration()
        wait.FromTimedelta(timedelta(seconds=TIMEOUT))
        answer: api.GetWorkflowResultResponse = self.stub.GetWorkflowResult(
            api.GetWorkflowResultRequest(workflow_id=workflow_id, wait=wait), timeout=TIMEOUT + 5
        )
        if not answer.closed or answer.workflow.status != wf.WORKFLOW_STATUS_COMPLETED:
            raise RuntimeError(f"{workflow_id} did not complete: {answer.workflow}")
        return answer.workflow

    def follow(self, workflow_id: str) -> list[tuple[float, wf.StreamFrame]]:
        """Every frame of the run's output stream with when it arrived (time.time()), read
        until the stream ends with the run."""
        received: list[tuple[float, wf.StreamFrame]] = []
        request = api.ReadStreamRequest(workflow_id=workflow_id, follow=True)
        for message in self.stub.ReadStream(request, timeout=TIMEOUT):
            now = time.time()
            received.extend((now, frame) for frame in message.frames)
            if message.end:
                break
        return received

    def close(self) -> None:
        self._channel.close()


def streams(cluster: Cluster, runs: int, samples: int, frames: int) -> dict[str, Any]:
    """The three figures, one run at a time on an otherwise idle cluster."""
    stub = _Stub(cluster)
    try:
        return {
            "result": result_latency(stub, runs),
            "first_frame": first_frame(stub, samples),
            "sustained": sustained(stub, frames),
        }
    finally:
        stub.close()


def result_latency(stub: _Stub, runs: int) -> dict[str, Any]:
    """The 10-step workflow, one at a time: the client's start → result returned, minus the
    run's own duration by the database clock (create → close): what getting the result adds."""
    progress = Progress("result latency")
    added, client_seen = [], []
    for index in range(runs):
        workflow_id = f"res-{index}"
        began = time.perf_counter()
        stub.start("noop_steps", workflow_id, 10)
        run = stub.result(workflow_id)
        seen = time.perf_counter() - began
        duration = (run.close_time.ToNanoseconds() - run.create_time.ToNanoseconds()) / 1e9
        client_seen.append(seen)
        added.append(max(0.0, seen - duration))
        progress.update(index + 1, runs)
    result = {"runs": runs, "client_ms": summary_ms(client_seen), **summary_ms(added)}
    result["target_ms"] = RESULT_TARGET_MS
    progress.done(f"{result['median_ms']:.2f} ms over the run's duration, median")
    return result


def first_frame(stub: _Stub, samples: int) -> dict[str, Any]:
    """A step emits `samples` chunks FRAME_GAP apart while a reader follows the stream: each
    chunk's emit time (inside it) → the reader has it."""
    progress = Progress("first frame")
    stub.start("emit_paced", "ff-1", {"count": samples, "gap": FRAME_GAP})
    received = stub.follow("ff-1")
    delays = [at - from_payload(frame.data)[1] for at, frame in _data(received)]
    _check_complete("ff-1", received, samples)
    result = {"samples": samples, **summary_ms(delays), "target_ms": FIRST_FRAME_TARGET_MS}
    progress.done(f"{result['median_ms']:.2f} ms emit → reader, median of {samples}")
    return result


def sustained(stub: _Stub, frames: int) -> dict[str, Any]:
    """A step emits `frames` chunks in a row while one reader follows: frames per second from
    the first emit to the last frame read."""
    progress = Progress("sustained frames")
    stub.start("emit_burst", "burst-1", frames)
    received = stub.follow("burst-1")
    _check_complete("burst-1", received, frames)
    data = _data(received)
    first_emitted = from_payload(data[0][1].data)[1]
    seconds = data[-1][0] - first_emitted
    result = {
        "frames": frames,
        "seconds": round(seconds, 3),
        "frames_per_s": round(frames / seconds, 1),
        "target_per_s": FRAMES_PER_S_TARGET,
    }
    progress.done(f"{result['frames_per_s']:.0f} frames/s, one step to one reader")
    return result


def _data(received: list[tuple[float, wf.StreamFrame]]) -> list[tuple[float, wf.StreamFrame]]:
    return [(at, frame) for at, frame in received if frame.kind == wf.FRAME_KIND_DATA]


def _check_complete(
    workflow_id: str, received: list[tuple[float, wf.StreamFrame]], expected: int
) -> None:
    """The reader got every frame once, in order: 1..expected, the chunks 0..expected-1."""
    seqs = [frame.seq for _, frame in received]
    indexes = [from_payload(frame.data)[0] for _, frame in _data(received)]
    if seqs != list(range(1, expected + 1)) or indexes != list(range(expected)):
        raise RuntimeError(f"{workflow_id}: frames out of order or missing: {seqs[:20]} ...")
