"""Payloads keep their exact values: integers of any size, floats apart from integers, bytes,
null and any string, through a workflow's input, a step's output, a signal, published state
and the result, with a Python and a Node.js worker, through the gRPC and the HTTP API and the
CLI; a value that cannot be encoded is refused with an error naming it, never changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import Client, from_payload, to_payload
from tests.fixtures.cluster import REPO_ROOT, Cluster, require_node

MODULE = "tests.e2e.payload_workflows"
SHARED_WORKER = "py"
WAIT = 60.0

VALUES: dict[str, Any] = {
    "big-int": 2**64 + 1,
    "float": 1.0,
    "bytes": b"\x00\xff\x80 raw",
    "nested": {"big": -(2**70), "f": 0.1, "whole": 2.0, "list": [None, True, "é", {"x": []}]},
    "null": None,
    "unicode": 'ünïcødé 🙂 \u2028 \x00 "quoted"',
}


def same(got: Any, expected: Any) -> bool:
    """Equal, and of the same type all the way down (1.0 is not 1)."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in got)
    if isinstance(expected, list):
        return len(got) == len(expected) and all(map(same, got, expected))
    return bool(got == expected)


def as_javascript(value: Any) -> Any:
    """What a value reads as in JavaScript, which has one number type: a whole float is an
    integer (1.0 reads as 1 and goes back as 1)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: as_javascript(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    return value


def run_all(client: Client, prefix: str, task_queue: str) -> None:
    """Start an echo_payloads run per value and send it the value as its signal."""
    for name, value in VALUES.items():
        client.start_workflow(
            "echo_payloads", value, workflow_id=f"{prefix}-{name}", task_queue=task_queue
        )
        client.signal(f"{prefix}-{name}", "value", value)


def check_all(client: Client, prefix: str, expect: Any = lambda value: value) -> None:
    for name, value in VALUES.items():
        workflow_id, expected = f"{prefix}-{name}", expect(value)
        described = client.wait(workflow_id, timeout=WAIT)
        assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described
        # The input is the bytes the client sent, whichever language runs the code.
        assert described.workflow.input == to_payload(value), name
        [step] = described.steps
        checks = {
            "input": from_payload(described.workflow.input),
            "step output": from_payload(step.output),
            "state echoed": client.query(workflow_id, "echoed"),
            "state signalled": from_payload(described.state["signalled"]),
            "result": from_payload(described.workflow.result),
        }
        assert same(checks.pop("input"), value), name
        for where, got in checks.items():
            assert same(got, expected), (name, where, got, expected)
        events = {e.event_type: e.payload for e in client.history(workflow_id)}
        assert events[wf.EVENT_TYPE_WORKFLOW_STARTED] == to_payload(value)
        assert same(from_payload(events[wf.EVENT_TYPE_SIGNAL_RECEIVED]), value)


def test_values_round_trip_exactly_through_a_python_worker(client: Client) -> None:
    run_all(client, "py", "default")
    check_all(client, "py")


def test_values_round_trip_exactly_through_a_node_worker(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    require_node()
    shared.start_node_worker("node", "node", tmp_path / "ledger")
    run_all(client, "node", "node")
    check_all(client, "node", as_javascript)


def test_a_value_that_cannot_be_encoded_is_refused_naming_its_type(client: Client) -> None:
    with pytest.raises(TypeError, match="value of type set is not encodable"):
        client.start_workflow("echo_payloads", {1, 2})
    with pytest.raises(TypeError, match=r"value\['score'\] of type float is not encodable"):
        client.signal("py-null", "value", {"score": float("nan")})
    for kind, named in (("nan", "of type float"), ("set", "of type set")):
        client.start_workflow("returns_unencodable", kind, workflow_id=f"unencodable-{kind}")
        result = from_payload(client.wait(f"unencodable-{kind}", timeout=WAIT).workflow.result)
        assert result.startswith("StepFailedError") and named in result, result


def test_the_api_refuses_an_unknown_encoding_and_data_that_is_not_json(
    shared: Cluster,
) -> None:
    with grpc.insecure_channel(shared.gateway) as channel:
        stub = apigrpc.WorkflowServiceStub(channel)
        for payload, message in (
            (Payload(encoding="text/yaml", data=b"a: 1"), "input has encoding 'text/yaml'"),
            (Payload(encoding="json/plain", data=b"[1, NaN]"), "NaN is not a JSON number"),
            (Payload(data=b"\xff"), "input is not UTF-8 JSON"),
        ):
            request = api.StartWorkflowRequest(workflow_type="echo_payloads", input=payload)
            with pytest.raises(grpc.RpcError) as caught:
                stub.StartWorkflow(request, timeout=30)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in (caught.value.details() or "")


# -- the HTTP API and the CLI ------------------------------------------------------------------

EXACT_TEXT = '{"big":18446744073709551617,"f":1.0,"e":1E+2,"s":"é"}'
BYTES = {"encoding": "binary/plain", "base64": "AP+AIHJhdw=="}


def http(cluster: Cluster, method: str, path: str, body: str | None = None) -> Any:
    """The answer's JSON, its numbers decoded as written (Decimal for those with a point)."""
    answer = requests.request(
        method,
        f"http://{cluster.http_address}{path}",
        data=body.encode() if body is not None else None,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return json.loads(answer.text, parse_float=Decimal)


def test_the_http_api_takes_and_shows_payloads_exactly(shared: Cluster, client: Client) -> None:
    for workflow_id, text in (("http-json", EXACT_TEXT), ("http-bytes", json.dumps(BYTES))):
        http(
            shared,
            "POST",
            "/v1/workflows",
            f'{{"workflow_type":"echo_payloads","workflow_id":"{workflow_id}","input":{text}}}',
        )
        http(
            shared,
            "POST",
            f"/v1/workflows/{workflow_id}/signals",
            f'{{"signal_name":"value","payload":{text}}}',
        )
        client.wait(workflow_id, timeout=WAIT)

    sent = client.describe("http-json").workflow.input
    assert sent == Payload(encoding="json/plain", data=EXACT_TEXT.encode())  # as written
    described = http(shared, "GET", "/v1/workflows/http-json")
    assert described["workflow"]["input"] == json.loads(EXACT_TEXT, parse_float=Decimal)
    assert str(described["workflow"]["input"]["f"]) == "1.0"
    assert (
        '"e":1E+2'
        in requests.get(  # the input as it was written, never through a float
            f"http://{shared.http_address}/v1/workflows/http-json", timeout=30
        ).text
    )
    # Through the Python worker: integers of any size and floats are what they were.
    exact = {"big": 18446744073709551617, "f": Decimal("1.0"), "e": Decimal("100.0"), "s": "é"}
    assert described["workflow"]["result"] == exact
    assert described["steps"][0]["output"] == exact
    assert described["state"]["echoed"] == exact
    queried = http(shared, "GET", "/v1/workflows/http-json/state/signalled")
    assert queried["value"] == exact
    history = http(shared, "GET", "/v1/workflows/http-json/history")
    started = history["events"][0]
    assert started["payload"] == json.loads(EXACT_TEXT, parse_float=Decimal)

    with_bytes = http(shared, "GET", "/v1/workflows/http-bytes")
    assert with_bytes["workflow"]["input"] == BYTES
    assert with_bytes["workflow"]["result"] == BYTES
    assert from_payload(client.describe("http-bytes").workflow.result) == b"\x00\xff\x80 raw"


def test_the_http_api_refuses_what_is_not_a_payload(shared: Cluster) -> None:
    base = f"http://{shared.http_address}"
    for body, message in (
        ('{"workflow_type":"echo_payloads","input":[NaN]}', "NaN is not a JSON number"),
        (
            '{"workflow_type":"echo_payloads","input":{"encoding":"binary/plain","base64":"%"}}',
            "input.base64 is not base64",
        ),
    ):
        answer = requests.post(f"{base}/v1/workflows", data=body, timeout=30)
        assert answer.status_code == 400, answer.text
        assert message in answer.json()["error"]["message"]


def test_the_cli_sends_and_shows_payloads_exactly(
    shared: Cluster, client: Client, tmp_path: Path
) -> None:
    gateway = shared.gateway

    def perdure(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "PERDURE_API_KEY"}
        env["PERDURE_DATA_DIR"] = str(tmp_path)
        done = subprocess.run(
            [sys.executable, "-m", "perdure.cli", "workflow", "--address", gateway, *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = '{"big": 18446744073709551617, "f": 1.0}'
    perdure("start", "echo_payloads", "--id", "cli-1", "--input", text)
    perdure("signal", "cli-1", "value", "--payload", text)
    client.wait("cli-1", timeout=WAIT)
    assert client.describe("cli-1").workflow.input.data == text.encode()  # as typed
    shown = json.loads(perdure("describe", "cli-1"), parse_float=Decimal)
    assert shown["workflow"]["result"] == {"big": 18446744073709551617, "f": Decimal("1.0")}
    assert str(shown["workflow"]["result"]["f"]) == "1.0"
    queried = json.loads(perdure("query", "cli-1", "echoed"), parse_float=Decimal)
    assert queried == {"big": 18446744073709551617, "f": Decimal("1.0")}
