"""Payloads in the HTTP API's JSON: taken from a body with their numbers as written, nested
messages included, and shown in an answer as their exact text."""

from __future__ import annotations

import json

import pytest

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common.errors import ApiError
from perdure.gateway.http.convert import decode_body, dumps, from_json, to_json


def test_a_body_payload_keeps_its_numbers_as_written() -> None:
    body = b'{"workflow_type": "t", "input": {"n": 18446744073709551617, "f": 1.0, "e": 1E+2}}'
    request = from_json(decode_body(body), api.StartWorkflowRequest())
    assert request.workflow_type == "t"
    assert request.input == Payload(
        encoding="json/plain", data=b'{"n":18446744073709551617,"f":1.0,"e":1E+2}'
    )


def test_nested_payloads_and_bytes_are_taken() -> None:
    body = (
        b'{"start": {"workflow_type": "t", "input": [1.50]}, "signal_name": "s",'
        b' "payload": {"encoding": "binary/plain", "base64": "AP8="}}'
    )
    request = from_json(decode_body(body), api.SignalWithStartWorkflowRequest())
    assert request.start.input == Payload(encoding="json/plain", data=b"[1.50]")
    assert request.payload == Payload(encoding="binary/plain", data=b"\x00\xff")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"input": NaN}', "NaN is not a JSON number"),
        (b'{"input": {"encoding": "binary/plain", "base64": "!"}}', "input.base64 is not base64"),
    ],
)
def test_what_is_not_a_payload_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        from_json(decode_body(body), api.StartWorkflowRequest())
    assert message in caught.value.message


def test_an_answer_shows_each_payload_as_its_text() -> None:
    answer = api.DescribeWorkflowResponse(
        workflow=wf.WorkflowInfo(
            workflow_id="w",
            input=Payload(encoding="json/plain", data=b'{"n": 18446744073709551617,\n"f": 1.0}'),
            result=Payload(encoding="binary/plain", data=b"\x00\xff"),
        ),
        state={"k": Payload(encoding="json/plain", data=b"2.50")},
        steps=[wf.StepInfo(step_id="s", output=Payload(encoding="json/plain", data=b"[1.0]"))],
    )
    text = dumps(to_json(answer))
    assert '"input":{"n": 18446744073709551617, "f": 1.0}' in text  # one line
    assert '"state":{"k":2.50}' in text
    assert '"output":[1.0]' in text
    shown = json.loads(text)
    assert shown["workflow"]["result"] == {"encoding": "binary/plain", "base64": "AP8="}
