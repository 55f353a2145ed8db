"""Run chains end to end: a loop that continues as new every few turns while signals stream in
(some sent again with the same signal id), on a Python and on a Node.js worker; and a workflow
id reused under its IdReusePolicy, through the gateway.

One cluster for the module, its Python worker serving tests/e2e/chain_workflows.py.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import requests

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import Cluster
from tests.fixtures.rpc import error_reason

MODULE = "tests.e2e.chain_workflows"
WAIT = 90.0  # upper bound of any wait for a run to get somewhere
TOTAL, EVERY = 14, 3  # signals, and turns per run: runs 1-4 take 3 each, run 5 the last 2


def _stream_signals(client: Client, workflow_id: str) -> None:
    """Send TOTAL signals in order, each sent again later with its signal id (as a client
    retrying a call whose answer it lost): a run may close between the two."""
    for n in range(TOTAL):
        assert client.signal(workflow_id, "msg", n, signal_id=f"m{n}")
        if n % 2:
            assert not client.signal(workflow_id, "msg", n - 1, signal_id=f"m{n - 1}")
    for n in range(0, TOTAL, 3):
        assert not client.signal(workflow_id, "msg", n, signal_id=f"m{n}")


def _check_chain(client: Client, workflow_id: str) -> None:
    """Every signal consumed once across the chain, in order; describe and history show the
    chain, each earlier run closed CONTINUED_AS_NEW with the next run's input."""
    latest = client.wait(workflow_id, timeout=WAIT).workflow
    assert latest.status == wf.WORKFLOW_STATUS_COMPLETED, latest
    result = from_payload(latest.result)
    runs = -(-TOTAL // EVERY)
    assert result["seen"] == list(range(TOTAL))
    assert (result["run"], result["run_id"]) == (runs, latest.run_id)
    assert latest.run_number == runs and latest.next_run_id == ""
    assert len(result["lengths"]) == runs - 1
    assert all(length > EVERY for length in result["lengths"])  # a consumption is an event
    # Back along the chain: each run names the next, and its journal ends by continuing.
    newer, run_id = latest, latest.previous_run_id
    for number in range(runs - 1, 0, -1):
        described = client.describe(workflow_id, run_id=run_id).workflow
        assert described.workflow_id == workflow_id
        assert (described.run_number, described.next_run_id) == (number, newer.run_id)
        assert described.status == wf.WORKFLOW_STATUS_CONTINUED_AS_NEW
        events = list(client.history(workflow_id, run_id=run_id))
        assert events[-1].event_type == wf.EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW
        assert events[-1].payload == newer.input
        newer, run_id = described, described.previous_run_id
    assert run_id == "" and newer.run_number == 1
    listed = client.list(workflow_type="chain_turns", page_size=1000).workflows
    assert [run.run_id for run in listed if run.workflow_id == workflow_id] == [latest.run_id]


def test_a_loop_continues_as_new_under_signals_on_a_python_worker(
    shared: Cluster, client: Client
) -> None:
    state = {"seen": [], "lengths": [], "total": TOTAL, "every": EVERY}
    client.start_workflow("chain_turns", state, workflow_id="chain-python")
    _stream_signals(client, "chain-python")
    _check_chain(client, "chain-python")


def test_a_loop_continues_as_new_under_signals_on_a_node_worker(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    worker = shared.start_node_worker("node-chains", "node-chains", tmp_path / "ledger")
    try:
        state = {"seen": [], "lengths": [], "total": TOTAL, "every": EVERY}
        client.start_workflow(
            "chain_turns", state, workflow_id="chain-node", task_queue="node-chains"
        )
        _stream_signals(client, "chain-node")
        _check_chain(client, "chain-node")
    finally:
        worker.kill()


def _refused(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    error = raised.value
    return error.code(), error_reason(error)


def test_a_workflow_id_is_reused_as_its_policy_says(shared: Cluster, client: Client) -> None:
    wid = "reused"
    first = client.start_workflow("chain_once", "one", workflow_id=wid)
    assert first.started and first.run_id
    assert client.wait(wid, timeout=WAIT).workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    # REFUSE (the default): the same start returns the closed run; another is ALREADY_EXISTS.
    again = client.start_workflow("chain_once", "one", workflow_id=wid)
    assert (again.started, again.run_id) == (False, first.run_id)
    conflict = _refused(lambda: client.start_workflow("chain_once", "two", workflow_id=wid))
    assert conflict == (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT")
    allow_if_failed = api.ID_REUSE_POLICY_ALLOW_IF_FAILED
    conflict = _refused(
        lambda: client.start_workflow(
            "chain_once", "two", workflow_id=wid, id_reuse_policy=allow_if_failed
        )
    )
    assert conflict == (grpc.StatusCode.ALREADY_EXISTS, "WORKFLOW_ID_CONFLICT")
    # ALLOW: run 2, its own journal; the same request id sent again makes no third.
    allow = api.ID_REUSE_POLICY_ALLOW
    second = client.start_workflow(
        "chain_once", "fail", workflow_id=wid, id_reuse_policy=allow, request_id="start-2"
    )
    assert second.started and second.run_id != first.run_id
    retried = client.start_workflow(
        "chain_once", "fail", workflow_id=wid, id_reuse_policy=allow, request_id="start-2"
    )
    assert (retried.started, retried.run_id) == (False, second.run_id)
    failed = client.wait(wid, timeout=WAIT).workflow
    assert (failed.status, failed.run_number, failed.previous_run_id) == (
        wf.WORKFLOW_STATUS_FAILED,
        2,
        first.run_id,
    )
    old = client.describe(wid, run_id=first.run_id).workflow
    assert (old.status, from_payload(old.result), old.next_run_id) == (
        wf.WORKFLOW_STATUS_COMPLETED,
        "one",
        second.run_id,
    )
    assert next(e.payload for e in client.history(wid, run_id=first.run_id)) == old.input
    # Over HTTP, the same with ?run_id=.
    url = f"http://{shared.http_address}/v1/workflows/{wid}"
    by_run = requests.get(url, params={"run_id": first.run_id}, timeout=WAIT).json()["workflow"]
    assert (by_run["run_id"], by_run["status"]) == (first.run_id, "WORKFLOW_STATUS_COMPLETED")
    unknown_run = requests.get(url, params={"run_id": "nope"}, timeout=WAIT)
    assert (
        unknown_run.status_code == 404 and unknown_run.json()["error"]["reason"] == "RUN_NOT_FOUND"
    )
    # ALLOW_IF_FAILED after a failed run: run 3.
    third = client.start_workflow(
        "chain_once", "three", workflow_id=wid, id_reuse_policy=allow_if_failed
    )
    assert third.started and third.run_id not in (first.run_id, second.run_id)
    # An unknown run id, or an unknown policy, is refused with a reason.
    unknown = _refused(lambda: client.describe(wid, run_id="no-such-run"))
    assert unknown == (grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")
    bad = _refused(lambda: client.start_workflow("chain_once", workflow_id="x", id_reuse_policy=9))
    assert bad == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
