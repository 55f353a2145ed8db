"""perdure.client against a real cluster: AsyncClient and Client hand out handles whose
result() is the value the workflow returned, exactly, or a typed error; a wait that runs out
is a WorkflowTimeoutError; watch() follows a run to its close; and stream() reads a step's
frames live across a connection cut by the network, each frame exactly once, the failed
attempt's text reset."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import (
    AlreadyStartedError,
    AsyncClient,
    Client,
    StreamText,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowTimeoutError,
)
from tests.chaos.proxy import RESET, Proxy
from tests.e2e.client_workflows import EXACT, spoken
from tests.fixtures.cluster import REPO_ROOT, Cluster

MODULE = "tests.e2e.client_workflows"
WAIT = 60.0


async def test_async_results_are_the_exact_values_and_errors_are_typed(shared: Cluster) -> None:
    async with AsyncClient(shared.gateway) as client:
        handle = await client.start("exact_values", {"n": 7}, workflow_id="exact")
        value = await handle.result(timeout=WAIT)
        assert value == {**EXACT, "echo": {"n": 7}}
        assert type(value["int"]) is int and value["big"] == 2**70
        assert type(value["float"]) is float
        # Started again as it was: the same run; with other input: taken.
        assert (await client.start("exact_values", {"n": 7}, workflow_id="exact")).run_id
        with pytest.raises(AlreadyStartedError) as taken:
            await client.start("exact_values", {"n": 8}, workflow_id="exact")
        assert taken.value.reason == "WORKFLOW_ID_CONFLICT"

        failing = await client.start("refuses", [1], workflow_id="refuses")
        with pytest.raises(WorkflowFailedError) as failed:
            await failing.result(timeout=WAIT)
        assert failed.value.failure.type == "ValueError"
        assert failed.value.failure.message == "cannot use [1]"

        unknown = client.get_handle("no-such-workflow")
        with pytest.raises(WorkflowNotFoundError) as missing:
            await unknown.result(timeout=WAIT)
        assert missing.value.reason == "WORKFLOW_NOT_FOUND" and "no-such-workflow" in str(
            missing.value
        )
        with pytest.raises(WorkflowNotFoundError):
            await unknown.describe()


def test_a_wait_that_runs_out_then_a_signal_and_the_watch_to_its_close(shared: Cluster) -> None:
    with Client(shared.gateway) as client:
        handle = client.start("waits_for_go", workflow_id="go")
        with pytest.raises(WorkflowTimeoutError):
            handle.result(timeout=0.5)
        assert handle.describe().workflow.status == wf.WORKFLOW_STATUS_WAITING
        assert handle.signal("go", {"count": 2, "ratio": 0.5}, signal_id="go-1")
        assert not handle.signal("go", {"count": 2, "ratio": 0.5}, signal_id="go-1")
        result = handle.result(timeout=WAIT)
        assert result == {"count": 2, "ratio": 0.5} and type(result["count"]) is int

        messages = list(handle.watch())
        assert messages[-1].closed
        assert messages[-1].workflow.status == wf.WORKFLOW_STATUS_COMPLETED
        events = [event for message in messages for event in message.events]
        ids = [event.event_id for event in events]
        assert ids == list(range(1, len(ids) + 1))  # every event once, in order
        assert [e.event_id for e in handle.history()] == ids
        resumed = [e.event_id for m in handle.watch(after_event_id=2) for e in m.events]
        assert resumed == ids[2:]
        assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_COMPLETED


CHUNKS = 40


async def test_a_stream_read_across_a_cut_connection_sees_each_frame_once(
    shared: Cluster, tmp_path: Path
) -> None:
    chunks = CHUNKS
    gate = tmp_path / "gate"
    proxy = Proxy()
    try:
        link = proxy.link("client", "gateway", ("127.0.0.1", shared.ports["gateway"]))
        async with AsyncClient(f"127.0.0.1:{link.port}") as client:
            handle = await client.start(
                "streams_text", {"gate": str(gate), "chunks": chunks}, workflow_id="talk"
            )
            text, seqs = StreamText(), []
            async for frame in handle.stream():
                seqs.append(frame.seq)
                text.add(frame)
                if frame.attempt == 2 and text.step("talk").count(" ") == chunks:
                    # The step waits at its gate: cut the reader's connection mid-stream,
                    # then let the step emit the rest while the reader reconnects.
                    proxy.apply([link], RESET)
                    assert not link.connections
                    proxy.heal()
                    gate.touch()
            assert await handle.result(timeout=WAIT) == "spoken"
    finally:
        proxy.close()
    assert seqs == list(range(1, len(seqs) + 1))  # no gap, no frame twice
    assert len(seqs) == 3 + 1 + 2 * chunks  # the dead attempt's, its reset, the retry's
    assert text.text == "".join(spoken(index) for index in range(2 * chunks))
    assert [(reset.step_id, reset.attempt) for reset in text.resets] == [("talk", 1)]

    # `perdure workflow watch ID --stream output` on the same run: the dead attempt's text,
    # the line that voids it, then the retry's text.
    watched = await asyncio.to_thread(_watch_stream, shared.gateway, "talk")
    assert watched.returncode == 0 and not watched.stderr, watched.stderr
    dead, reset, retried = watched.stdout.split("\n", 2)
    assert dead == "dead0 dead1 dead2 "
    assert reset.startswith("[reset: step talk attempt 1 failed")
    assert retried.strip() == "".join(spoken(index) for index in range(2 * CHUNKS)).strip()


def _watch_stream(gateway: str, workflow_id: str) -> subprocess.CompletedProcess[str]:
    """`perdure workflow watch ID --stream output`, run to its end."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "perdure.cli", "workflow", "watch", workflow_id),
            *("--stream", "output", "--address", gateway),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
