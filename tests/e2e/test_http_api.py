"""The gateway's HTTP/JSON API on a real cluster: every route against the research agent, the
errors a person gets, the live feed of events with its resume, and keys over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key

MODULE = "examples.research_agent"
SHARED_WORKER = "agent-1"
SHARED_ENV = {"PERDURE_EXAMPLE_DB": "{workdir}/research_agent.sqlite3"}

TIMEOUT = 30.0


@pytest.fixture
def agent(shared: Cluster) -> Cluster:
    """The module's cluster, with a worker serving the research agent example (each test's
    runs have ids of their own)."""
    return shared


class Http:
    """JSON calls to one gateway's HTTP port."""

    def __init__(self, address: str, key: str | None = None) -> None:
        self.base = f"http://{address}"
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """The raw answer."""
        return requests.request(
            method, self.base + path, headers=self.headers, timeout=TIMEOUT, **kwargs
        )

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON of a 200 answer."""
        answer = self.call(method, path, **kwargs)
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"].startswith("application/json")
        return answer.json()

    def error(self, status: int, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The error body of an answer that must have `status`."""
        answer = self.call(method, path, **kwargs)
        assert answer.status_code == status, answer.text
        error: dict[str, Any] = answer.json()["error"]
        assert error["status"] == status and error["message"]
        return error

    def feed(self, path: str, **headers: str) -> Iterator[tuple[str, str, Any]]:
        """The (id, event, data) of each Server-Sent Event until the stream ends."""
        with requests.get(
            self.base + path, headers={**self.headers, **headers}, stream=True, timeout=TIMEOUT
        ) as answer:
            assert answer.status_code == 200, answer.text
            assert answer.headers["Content-Type"] == "text/event-stream"
            fields: dict[str, str] = {}
            for line in answer.iter_lines(decode_unicode=True):
                if line.startswith(":"):
                    continue
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                    continue
                yield fields.get("id", ""), fields["event"], json.loads(fields["data"])
                fields = {}


def wait_for_approval(http: Http, workflow_id: str) -> dict[str, Any]:
    """The run's description once it waits for its approval (the phase is published a moment
    before the run suspends: both must be seen)."""
    described: dict[str, Any] = {}

    def waiting() -> bool:
        nonlocal described
        described = http.ok("GET", f"/v1/workflows/{workflow_id}")
        return bool(
            described["state"].get("phase") == "awaiting_approval"
            and described["workflow"]["status"] == "WORKFLOW_STATUS_WAITING"
            and described["pending_approvals"]
        )

    wait_until(waiting, 60, f"{workflow_id} to wait for its approval")
    return described


def test_a_research_run_over_http_from_start_to_report(agent: Cluster) -> None:
    http = Http(agent.http_address)
    started = http.ok(
        "POST",
        "/v1/workflows",
        json={"workflow_type": "research_agent", "workflow_id": "web-1", "input": {"topic": "x"}},
    )
    assert started["workflow_id"] == "web-1" and started["started"] is True
    described = wait_for_approval(http, "web-1")
    run = described["workflow"]
    assert run["status"] == "WORKFLOW_STATUS_WAITING"
    assert run["wait"]["kind"] == "WAIT_KIND_APPROVAL"
    assert run["wait"]["name"] == "$approval:recommendation"
    assert isinstance(run["event_count"], str) and int(run["event_count"]) > 5  # int64
    assert [step["status"] for step in described["steps"]][:2] == ["STEP_STATUS_COMPLETED"] * 2
    recommendation = http.ok("GET", "/v1/workflows/web-1/state/recommendation")["value"]
    assert recommendation == described["state"]["recommendation"]

    (asked,) = described["pending_approvals"]
    assert asked["details"]["recommendation"] == recommendation
    listed = http.ok("GET", "/v1/approvals", params={"workflow_id": "web-1", "status": "pending"})
    assert [a["approval_id"] for a in listed["approvals"]] == [asked["approval_id"]]
    decided = http.ok(
        "POST",
        f"/v1/approvals/{asked['approval_id']}/decide",
        json={"approve": True, "reason": "go", "details_sha256": asked["details_sha256"]},
    )
    assert decided["approval"]["status"] == "APPROVAL_STATUS_APPROVED"
    feed = list(http.feed("/v1/workflows/web-1/events"))
    assert feed[-1] == ("", "end", {"status": "WORKFLOW_STATUS_COMPLETED"})
    history = [data for _, event, data in feed if event == "history"]
    assert [int(event["event_id"]) for event in history] == list(range(1, len(history) + 1))
    assert [ident for ident, event, _ in feed if event == "history"] == [
        event["event_id"] for event in history
    ]
    received = next(e for e in history if e["event_type"] == "EVENT_TYPE_APPROVAL_DECIDED")
    assert received["payload"]["approved"] is True and received["payload"]["reason"] == "go"
    done = http.ok("GET", "/v1/workflows/web-1")["workflow"]
    assert done["status"] == "WORKFLOW_STATUS_COMPLETED" and done["result"]

    # The same journal, paged, and after a given event.
    page = http.ok("GET", "/v1/workflows/web-1/history", params={"page_size": 3})
    assert [e["event_id"] for e in page["events"]] == ["1", "2", "3"] and page["next_page_token"]
    rest = http.ok("GET", "/v1/workflows/web-1/history", params={"after_event_id": 3})
    assert rest["events"] == history[3:]


def test_the_feed_resumes_after_the_last_event_seen_and_follows_a_live_run(
    agent: Cluster,
) -> None:
    http = Http(agent.http_address)
    http.ok("POST", "/v1/workflows", json={"workflow_type": "research_agent", "workflow_id": "f1"})
    (asked,) = wait_for_approval(http, "f1")["pending_approvals"]
    feed = http.feed("/v1/workflows/f1/events", **{"Last-Event-ID": "4"})
    first_id, event, data = next(feed)  # the run waits: the stream stays open
    assert (first_id, event, data["event_id"]) == ("5", "history", "5")
    http.ok(
        "POST",
        f"/v1/approvals/{asked['approval_id']}/decide",
        json={"approve": False, "reason": "no", "details_sha256": asked["details_sha256"]},
    )
    rest = list(feed)
    assert rest[-1][1:] == ("end", {"status": "WORKFLOW_STATUS_COMPLETED"})
    decided = [e[2] for e in rest if e[2].get("event_type") == "EVENT_TYPE_APPROVAL_DECIDED"]
    assert [event["payload"]["reason"] for event in decided] == ["no"]


def test_listing_cancelling_terminating_and_signalling(agent: Cluster) -> None:
    http = Http(agent.http_address)
    for workflow_id in ("list-a", "list-b", "other"):
        http.ok(
            "POST",
            "/v1/workflows",
            json={"workflow_type": "research_agent", "workflow_id": workflow_id},
        )
    listed = http.ok("GET", "/v1/workflows", params={"workflow_id_prefix": "list-"})
    assert [run["workflow_id"] for run in listed["workflows"]] == ["list-b", "list-a"]
    wait_for_approval(http, "list-a")
    waiting = http.ok("GET", "/v1/workflows", params={"status": "WORKFLOW_STATUS_WAITING"})
    assert "list-a" in [run["workflow_id"] for run in waiting["workflows"]]

    signalled = http.ok(
        "POST",
        "/v1/workflows/list-a/signals",
        json={"signal_name": "note", "payload": [1, 2], "signal_id": "n-1"},
    )
    assert signalled == {"accepted": True}
    assert http.ok(
        "POST",
        "/v1/workflows/list-a/signals",
        json={"signal_name": "note", "payload": [1, 2], "signal_id": "n-1"},
    ) == {"accepted": False}  # the same signal id, applied once
    pending = http.ok("GET", "/v1/workflows/list-a")["pending_signals"]
    assert [(s["name"], s["payload"]) for s in pending] == [("note", [1, 2])]

    assert http.ok("POST", "/v1/workflows/list-a/cancel", json={"reason": "enough"}) == {}
    assert http.ok("POST", "/v1/workflows/list-b/terminate", data=b"") == {}
    wait_until(
        lambda: (
            http.ok("GET", "/v1/workflows/list-a")["workflow"]["status"]
            == "WORKFLOW_STATUS_CANCELLED"
        ),
        60,
        "the cancelled run to close",
    )
    assert (
        http.ok("GET", "/v1/workflows/list-b")["workflow"]["status"] == "WORKFLOW_STATUS_TERMINATED"
    )
    with_start = http.ok(
        "POST",
        "/v1/signal-with-start",
        json={
            "start": {"workflow_type": "research_agent", "workflow_id": "sws"},
            "signal_name": "note",
        },
    )
    assert with_start == {"started": True, "accepted": True}


def test_errors_answer_with_the_status_of_their_grpc_code_and_a_reason(agent: Cluster) -> None:
    http = Http(agent.http_address)
    missing = http.error(404, "GET", "/v1/workflows/nope")
    assert (missing["code"], missing["reason"]) == ("NOT_FOUND", "WORKFLOW_NOT_FOUND")
    assert http.error(404, "GET", "/v1/workflows/nope/events")["reason"] == "WORKFLOW_NOT_FOUND"
    bad_json = http.error(400, "POST", "/v1/workflows", data=b"{not json")
    assert (bad_json["code"], bad_json["reason"]) == ("INVALID_ARGUMENT", "INVALID_JSON")
    unknown = http.error(400, "POST", "/v1/workflows", json={"workflow_typ": "x"})
    assert "workflow_typ" in unknown["message"]
    assert http.error(400, "POST", "/v1/workflows", json=[1])["reason"] == "INVALID_JSON"
    no_type = http.error(400, "POST", "/v1/workflows", json={})
    assert "workflow_type" in no_type["message"]
    unregistered = http.error(404, "POST", "/v1/workflows", json={"workflow_type": "nobody"})
    assert unregistered["reason"] == "WORKFLOW_TYPE_NOT_REGISTERED"
    assert "page_size" in http.error(400, "GET", "/v1/workflows?page_size=x")["message"]
    assert "colour" in http.error(400, "GET", "/v1/workflows?colour=red")["message"]
    assert http.error(400, "GET", "/v1/workflows?status=DONE")["reason"] == "INVALID_JSON"
    wrong_place = http.error(
        400, "POST", "/v1/workflows/a/signals", json={"workflow_id": "b", "signal_name": "s"}
    )
    assert "path" in wrong_place["message"]
    decision = http.error(400, "POST", "/v1/approvals/a/decide", json={"approve": True})
    assert "details_sha256" in decision["message"]
    assert http.error(400, "GET", "/v1/workflows/a/events?after_event_id=x")["message"]
    http.ok("POST", "/v1/workflows", json={"workflow_type": "research_agent", "workflow_id": "d"})
    clash = http.error(
        409,
        "POST",
        "/v1/workflows",
        json={"workflow_type": "research_agent", "workflow_id": "d", "input": {"topic": "y"}},
    )
    assert clash["code"] == "ALREADY_EXISTS"
    assert http.error(404, "GET", "/v2/nothing")["code"] == "NOT_FOUND"
    assert http.error(405, "DELETE", "/v1/workflows")["code"] == "UNIMPLEMENTED"


def test_the_status_names_of_the_cli_and_bodies_a_newcomer_sends(agent: Cluster) -> None:
    http = Http(agent.http_address)
    http.ok("POST", "/v1/workflows", json={"workflow_type": "research_agent", "workflow_id": "n"})
    for name in ("waiting", "Running", "WORKFLOW_STATUS_RUNNING"):  # as the CLI, or in full
        assert "workflows" in http.ok("GET", f"/v1/workflows?status={name}")
    completed = http.ok("GET", "/v1/workflows?status=completed")["workflows"]
    assert {run["status"] for run in completed} <= {"WORKFLOW_STATUS_COMPLETED"}
    wrong = http.error(400, "GET", "/v1/workflows?status=done")
    assert "completed" in wrong["message"] and wrong["reason"] == "INVALID_JSON"

    not_json = http.error(400, "POST", "/v1/workflows", data=b"workflow_type=research_agent")
    assert not_json["reason"] == "INVALID_JSON"
    assert "not valid JSON" in not_json["message"] and "Expecting" not in not_json["message"]
    deep = http.error(400, "POST", "/v1/workflows", data=b"[" * 10_000 + b"]" * 10_000)
    assert deep["reason"] == "INVALID_JSON"
    assert "the body nests deeper than" in deep["message"]
    assert "recursion" not in deep["message"].lower()


def test_the_openapi_document_and_the_ui_are_served(agent: Cluster) -> None:
    http = Http(agent.http_address)
    document = http.ok("GET", "/openapi.json")
    assert document["openapi"] == "3.1.0"
    operations = {
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
    }
    assert {"StartWorkflow", "DecideApproval", "FollowWorkflow", "ListWorkflows"} <= operations
    page = http.call("GET", "/")
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]


def test_keys_and_roles_apply_over_http(start_cluster: Callable[..., Cluster]) -> None:
    cluster = start_cluster(PERDURE_AUTH="on")
    reader = Http(cluster.http_address, make_key(cluster, "default", "reader"))
    anonymous = Http(cluster.http_address)
    missing = anonymous.error(401, "GET", "/v1/workflows")
    assert (missing["code"], missing["reason"]) == ("UNAUTHENTICATED", "API_KEY_MISSING")
    assert reader.ok("GET", "/v1/workflows") == {"workflows": [], "next_page_token": ""}
    refused = reader.error(403, "POST", "/v1/workflows", json={"workflow_type": "x"})
    assert refused["code"] == "PERMISSION_DENIED"
    invalid = Http(cluster.http_address, "prd_nope_nope").error(401, "GET", "/v1/workflows")
    assert invalid["reason"] == "API_KEY_INVALID"
