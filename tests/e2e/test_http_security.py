"""The gateway's HTTP port against hostile callers, on real clusters: no body is read before
its caller's key passes, bodies are capped per route whatever their framing (with keys off
too), each key holds a bounded number of live feeds and loses them when it is revoked, every
answer carries the security headers, and crafted input is a 400 in the API's own words."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from grpc_health.v1 import health_pb2, health_pb2_grpc

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admin_grpc
from perdure.common.auth import bearer_metadata
from perdure.common.errors import ApiError
from perdure.common.page_tokens import MAX_PAGE_TOKEN_LENGTH, encode_page_token
from perdure.common.payload import MAX_PAYLOAD_BYTES
from perdure.gateway import validate
from perdure.gateway.http.admission import ENVELOPE_BYTES
from perdure.gateway.http.headers import SECURITY_HEADERS
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.postgres import Databases
from tests.fixtures.tls import make_certs

TIMEOUT = 30.0
FEEDS_PER_KEY = 2
START_CAP = MAX_PAYLOAD_BYTES + ENVELOPE_BYTES  # a start's body: one payload
SMALL_CAP = ENVELOPE_BYTES  # cancel, terminate, decide: no payload
# One made-up key, reused: the gateway remembers a refused token, so sending it again costs
# nothing (distinct bad keys would spend the failure budget of the HTTP port's address).
BOGUS_KEY = "prd_0123456789ab_not-a-real-secret-at-all"


@dataclass(frozen=True)
class Keys:
    """Tokens of the secured cluster's namespace."""

    admin: str
    operator: str
    reader: str


@pytest.fixture(scope="module")
def secured(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster with keys on, few feeds per key, and a worker serving tests.e2e's waiting
    workflows."""
    workdir: Path = tmp_path_factory.mktemp("http-security")
    with databases.fresh() as dsn:
        cluster = Cluster(
            dsn,
            workdir,
            env_overrides={"PERDURE_AUTH": "on", "PERDURE_HTTP_FEEDS_PER_KEY": str(FEEDS_PER_KEY)},
        )
        try:
            cluster.start_services()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def keys(secured: Cluster) -> Keys:
    """An admin key made in the database, the others through the gateway; and the worker."""
    admin_key = make_key(secured, "default", "admin")
    operator = new_key(secured, admin_key, admin.ROLE_OPERATOR)[1]
    reader = new_key(secured, admin_key, admin.ROLE_READER)[1]
    worker = new_key(secured, admin_key, admin.ROLE_WORKER, "default")[1]
    secured.start_worker("waiter", module="tests.e2e.waiting_workflows", PERDURE_API_KEY=worker)
    return Keys(admin_key, operator, reader)


@pytest.fixture(scope="module")
def open_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A cluster with keys off (PERDURE_AUTH=off), few feeds per address, and a worker serving
    tests.e2e's waiting workflows."""
    workdir: Path = tmp_path_factory.mktemp("http-open")
    with databases.fresh() as dsn:
        cluster = Cluster(
            dsn, workdir, env_overrides={"PERDURE_HTTP_FEEDS_PER_KEY": str(FEEDS_PER_KEY)}
        )
        try:
            cluster.start_services()
            cluster.start_worker("waiter", module="tests.e2e.waiting_workflows")
            yield cluster
        finally:
            cluster.stop()


# -- helpers ---------------------------------------------------------------------------------------


def new_key(cluster: Cluster, admin_key: str, role: admin.Role, *queues: str) -> tuple[str, str]:
    """A key made through the gateway's AdminService: its id and token."""
    with grpc.insecure_channel(cluster.gateway) as channel:
        made = admin_grpc.AdminServiceStub(channel).CreateApiKey(
            admin.CreateApiKeyRequest(role=role, task_queues=list(queues)),
            metadata=bearer_metadata(admin_key),
            timeout=TIMEOUT,
        )
    return made.key.key_id, made.token


def revoke(cluster: Cluster, admin_key: str, key_id: str) -> None:
    with grpc.insecure_channel(cluster.gateway) as channel:
        admin_grpc.AdminServiceStub(channel).RevokeApiKey(
            admin.RevokeApiKeyRequest(key_id=key_id),
            metadata=bearer_metadata(admin_key),
            timeout=TIMEOUT,
        )


def health(cluster: Cluster) -> int:
    """The gateway's gRPC health status (it must answer within the timeout)."""
    with grpc.insecure_channel(cluster.gateway) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=TIMEOUT
        )
    return int(reply.status)


def call(
    cluster: Cluster, method: str, path: str, key: str = "", **kwargs: Any
) -> requests.Response:
    """An HTTP call with `key` as its bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers.update(kwargs.pop("headers", {}))
    return requests.request(
        method, f"http://{cluster.http_address}{path}", headers=headers, timeout=TIMEOUT, **kwargs
    )


def error_of(answer: requests.Response, status: int) -> dict[str, Any]:
    """The API's error body of an answer that must have `status`."""
    streaming = answer.headers.get("Content-Type", "").startswith("text/event-stream")
    assert answer.status_code == status, "a feed" if streaming else answer.text  # (never ends)
    assert answer.headers["Content-Type"].startswith("application/json"), answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["status"] == status and error["message"], error
    return error


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read off a raw socket."""

    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = json.loads(self.body)["error"]
        assert error["status"] == self.status, error
        return error


def connect(cluster: Cluster) -> socket.socket:
    host, _, port = cluster.http_address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=TIMEOUT)


def head(path: str, key: str = "", **headers: str) -> bytes:
    """A POST's request line and headers (names given with _ for -)."""
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(sock: socket.socket) -> Answer:
    """One answer (a 100 Continue too): status line, headers, and the body its Content-Length
    gives. Fails if the connection ends first or nothing comes within TIMEOUT."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _received(sock, data)
    top, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        rest += _received(sock, rest)
    return Answer(int(status_line.split()[1]), headers, rest[:length])


def _received(sock: socket.socket, so_far: bytes) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise AssertionError(f"the connection ended before a whole answer: {so_far[:300]!r}")
    return chunk


def send_quietly(sock: socket.socket, data: bytes) -> None:
    """Send what the server lets through: it may close once it has answered."""
    with contextlib.suppress(OSError):
        sock.sendall(data)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def feed(cluster: Cluster, key: str, workflow_id: str, **headers: str) -> requests.Response:
    """An open feed (its first event read), or the refusal."""
    return requests.get(
        f"http://{cluster.http_address}/v1/workflows/{workflow_id}/events",
        headers={**({"Authorization": f"Bearer {key}"} if key else {}), **headers},
        stream=True,
        timeout=TIMEOUT,
    )


def start_waiting_run(cluster: Cluster, keys: Keys | None, workflow_id: str) -> None:
    """A run that waits for a signal ("go") for as long as the test needs."""
    answer = call(
        cluster,
        "POST",
        "/v1/workflows",
        keys.operator if keys else "",
        json={"workflow_type": "two_signals", "workflow_id": workflow_id},
    )
    assert answer.status_code == 200, answer.text


# -- nothing is read before the key passes ---------------------------------------------------------


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize(
    ("who", "status", "reason"),
    [
        ("nobody", 401, "API_KEY_MISSING"),
        ("bogus", 401, "API_KEY_INVALID"),
        ("reader", 403, "PERMISSION_DENIED"),
    ],
)
def test_a_body_is_not_read_before_its_callers_key_may_make_the_call(
    secured: Cluster, keys: Keys, framing: str, who: str, status: int, reason: str
) -> None:
    key = {"nobody": "", "bogus": BOGUS_KEY, "reader": keys.reader}[who]
    framed = (
        {"Content_Length": str(START_CAP)}
        if framing == "content-length"
        else {"Transfer_Encoding": "chunked"}
    )
    with connect(secured) as sock:
        # The headers and the body's first bytes only: an answer can come only from a server
        # that did not wait for the rest.
        first = b'{"workflow_type": "two_signals", "input": "' + b"x" * 1000
        sock.sendall(head("/v1/workflows", key, **framed))
        sock.sendall(first if framing == "content-length" else chunk(first))
        answer = read_answer(sock)
    assert answer.status == status
    assert (answer.error()["reason"], answer.error()["code"]) == (
        reason,
        "UNAUTHENTICATED" if status == 401 else "PERMISSION_DENIED",
    )


def test_an_anonymous_body_of_15_mb_is_refused_unread_and_the_gateway_stays_serving(
    secured: Cluster,
) -> None:
    size = 15 * 1024 * 1024
    # Declared: refused from its Content-Length alone, with not a byte of it sent.
    with connect(secured) as sock:
        sock.sendall(head("/v1/workflows", Content_Length=str(size)))
        answer = read_answer(sock)
    assert answer.status == 413
    error = answer.error()
    assert (error["code"], error["reason"]) == ("RESOURCE_EXHAUSTED", "BODY_TOO_LARGE")
    assert f"at most {START_CAP} bytes" in error["message"]

    # Chunked (no length to judge): refused for want of a key while the client pushes all
    # 15 MB at it; health answers SERVING all along.
    with connect(secured) as sock:
        sock.sendall(head("/v1/workflows", Transfer_Encoding="chunked"))
        pushing = threading.Thread(
            target=send_quietly, args=(sock, chunk(b"[" + b"1," * (size // 2)) + b"0\r\n\r\n")
        )
        pushing.start()
        try:
            answer = read_answer(sock)
            assert health(secured) == health_pb2.HealthCheckResponse.SERVING
        finally:
            sock.shutdown(socket.SHUT_RDWR)
            pushing.join(TIMEOUT)
    assert answer.status == 401 and answer.error()["reason"] == "API_KEY_MISSING"
    assert health(secured) == health_pb2.HealthCheckResponse.SERVING


def test_every_body_route_lets_a_key_with_its_role_through(secured: Cluster, keys: Keys) -> None:
    calls = [
        ("/v1/workflows", {"workflow_type": "two_signals", "workflow_id": "routes-1"}),
        ("/v1/workflows/routes-1/signals", {"signal_name": "note", "signal_id": "n-1"}),
        ("/v1/workflows/routes-1/signals", {"signal_name": "note", "signal_id": "a-1"}),
        (
            "/v1/signal-with-start",
            {
                "start": {"workflow_type": "two_signals", "workflow_id": "routes-2"},
                "signal_name": "go",
            },
        ),
        ("/v1/workflows/routes-1/cancel", {"reason": "done"}),
        ("/v1/workflows/routes-2/terminate", {"reason": "done"}),
    ]
    for path, body in calls:
        refused = error_of(call(secured, "POST", path, keys.reader, json=body), 403)
        assert refused["code"] == "PERMISSION_DENIED", (path, refused)
    answers = [call(secured, "POST", path, keys.operator, json=body) for path, body in calls]
    assert [a.status_code for a in answers] == [200] * len(calls), [a.text for a in answers]
    assert answers[2].json() == {"accepted": True}
    # The same signal again (its answer lost, say): applied once.
    again = call(secured, "POST", calls[2][0], keys.operator, json=calls[2][1])
    assert again.json() == {"accepted": False}, again.text


def test_100_continue_is_said_only_once_the_key_passes(secured: Cluster, keys: Keys) -> None:
    body = json.dumps({"workflow_type": "two_signals", "workflow_id": "expect-1"}).encode()
    with connect(secured) as sock:
        sock.sendall(head("/v1/workflows", Expect="100-continue", Content_Length=str(len(body))))
        refused = read_answer(sock)  # the final answer, not an invitation to send
    assert refused.status == 401

    with connect(secured) as sock:
        sock.sendall(
            head(
                "/v1/workflows",
                keys.operator,
                Expect="100-continue",
                Content_Length=str(len(body)),
            )
        )
        assert read_answer(sock).status == 100
        sock.sendall(body)
        answer = read_answer(sock)
    assert answer.status == 200, answer.body
    assert json.loads(answer.body)["workflow_id"] == "expect-1"


# -- bodies are capped per route -------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["on", "off"])
def test_bodies_are_capped_per_route_whatever_their_framing(
    request: pytest.FixtureRequest, auth: str
) -> None:
    cluster: Cluster = request.getfixturevalue("secured" if auth == "on" else "open_cluster")
    key = request.getfixturevalue("keys").operator if auth == "on" else ""
    routes = {
        "/v1/workflows": START_CAP,
        "/v1/workflows/w/signals": START_CAP,
        "/v1/signal-with-start": 2 * MAX_PAYLOAD_BYTES + ENVELOPE_BYTES,
        "/v1/approvals/a/decide": SMALL_CAP,
        "/v1/workflows/w/cancel": SMALL_CAP,
        "/v1/workflows/w/terminate": SMALL_CAP,
    }
    for path, cap in routes.items():
        with connect(cluster) as sock:
            sock.sendall(head(path, key, Content_Length=str(cap + 1)))
            declared = read_answer(sock)
        assert declared.status == 413, (path, declared.body)
        assert declared.error()["reason"] == "BODY_TOO_LARGE"
        assert f"at most {cap} bytes" in declared.error()["message"]

    # Chunked: read up to the cap, then refused.
    with connect(cluster) as sock:
        sock.sendall(head("/v1/workflows/w/cancel", key, Transfer_Encoding="chunked"))
        pushing = threading.Thread(
            target=send_quietly, args=(sock, chunk(b" " * (SMALL_CAP + 4096)) + b"0\r\n\r\n")
        )
        pushing.start()
        try:
            streamed = read_answer(sock)
        finally:
            sock.shutdown(socket.SHUT_RDWR)
            pushing.join(TIMEOUT)
    assert streamed.status == 413, streamed.body
    assert f"is more than {SMALL_CAP} bytes" in streamed.error()["message"]

    # Under the cap, the same routes read and convert the body as ever.
    answer = call(cluster, "POST", "/v1/workflows", key, json={"workflow_type": "nobody"})
    assert error_of(answer, 404)["reason"] == "WORKFLOW_TYPE_NOT_REGISTERED"


# -- live feeds ------------------------------------------------------------------------------------


def test_each_key_holds_a_bounded_number_of_feeds(secured: Cluster, keys: Keys) -> None:
    start_waiting_run(secured, keys, "feeds-1")
    reader = new_key(secured, keys.admin, admin.ROLE_READER)[1]  # this test's feeds alone
    held = [feed(secured, reader, "feeds-1") for _ in range(FEEDS_PER_KEY)]
    # Each feed's reader is kept: a reader dropped closes its feed's connection.
    readers = [answer.iter_lines() for answer in held]
    try:
        for answer, lines in zip(held, readers, strict=True):
            assert answer.status_code == 200, answer.text
            assert next(lines).startswith(b"id: ")  # streaming
        refused = error_of(feed(secured, reader, "feeds-1"), 429)
        assert (refused["code"], refused["reason"]) == ("RESOURCE_EXHAUSTED", "TOO_MANY_FEEDS")
        assert f"PERDURE_HTTP_FEEDS_PER_KEY={FEEDS_PER_KEY}" in refused["message"]
        with feed(secured, keys.operator, "feeds-1") as other:  # another key has its own
            assert other.status_code == 200, other.text

        # A feed closed by its client frees its place.
        held.pop().close()

        def reopened() -> bool:
            answer = feed(secured, reader, "feeds-1")
            if answer.status_code == 200:
                held.append(answer)
                return True
            answer.close()
            return False

        wait_until(reopened, TIMEOUT, "the closed feed's place to be free again", interval=0.2)
    finally:
        for answer in held:
            answer.close()


def test_without_keys_each_address_holds_a_bounded_number_of_feeds(
    open_cluster: Cluster,
) -> None:
    start_waiting_run(open_cluster, None, "feeds-open")
    held = [feed(open_cluster, "", "feeds-open") for _ in range(FEEDS_PER_KEY)]
    try:
        assert [answer.status_code for answer in held] == [200] * FEEDS_PER_KEY
        refused = error_of(feed(open_cluster, "", "feeds-open"), 429)
        assert refused["reason"] == "TOO_MANY_FEEDS" and "address" in refused["message"]
    finally:
        for answer in held:
            answer.close()


def test_a_feed_ends_when_its_key_is_revoked(secured: Cluster, keys: Keys) -> None:
    start_waiting_run(secured, keys, "revoked-1")
    key_id, token = new_key(secured, keys.admin, admin.ROLE_READER)
    with feed(secured, token, "revoked-1") as answer:
        assert answer.status_code == 200, answer.text
        lines = answer.iter_lines(decode_unicode=True)
        assert next(lines).startswith("id: ")
        revoke(secured, keys.admin, key_id)
        rest = list(lines)  # the feed ends by itself (or the read times out)
    assert "event: error" in rest, rest
    error = json.loads(rest[rest.index("event: error") + 1].removeprefix("data: "))["error"]
    assert (error["code"], error["status"]) == ("UNAUTHENTICATED", 401)
    assert error["reason"] in ("API_KEY_REVOKED", "API_KEY_INVALID"), error
    assert "event: end" not in rest


# -- headers ---------------------------------------------------------------------------------------


def test_every_answer_carries_the_security_headers(secured: Cluster, keys: Keys) -> None:
    start_waiting_run(secured, keys, "headers-1")
    answers = [
        call(secured, "GET", "/"),
        call(secured, "GET", "/ui/app.js"),
        call(secured, "GET", "/ui/style.css"),
        call(secured, "GET", "/openapi.json"),
        call(secured, "GET", "/v1/workflows", keys.reader),
        call(secured, "GET", "/v1/workflows"),  # 401
        call(secured, "GET", "/v2/nothing"),  # 404
        call(secured, "DELETE", "/v1/workflows"),  # 405
        call(secured, "POST", "/v1/workflows/w/cancel", keys.operator, data=b"x" * 70_000),
    ]
    with feed(secured, keys.admin, "headers-1") as stream:
        answers.append(stream)
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 200, 401, 404, 405, 413, 200]
    for answer in answers:
        for name, value in SECURITY_HEADERS.items():
            assert answer.headers.get(name) == value, (answer.url, name, answer.headers)
        assert "Strict-Transport-Security" not in answer.headers  # plain HTTP
    policy = answers[0].headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy


def test_https_answers_also_ask_for_https_from_then_on(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> None:
    workdir: Path = tmp_path_factory.mktemp("http-tls")
    certs = make_certs(workdir / "certs")
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, workdir, certs=certs)
        try:
            cluster.start_services()
            answer = requests.get(
                f"https://{cluster.http_address}/openapi.json",
                verify=str(certs / "ca.pem"),
                timeout=TIMEOUT,
            )
        finally:
            cluster.stop()
    assert answer.status_code == 200
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
    assert answer.headers["X-Frame-Options"] == "DENY"


# -- crafted input ---------------------------------------------------------------------------------


def test_crafted_bodies_are_invalid_arguments_in_the_apis_words(
    secured: Cluster, keys: Keys
) -> None:
    nested = error_of(
        call(secured, "POST", "/v1/workflows", keys.operator, data=b"[" * 100_000), 400
    )
    assert (nested["code"], nested["reason"]) == ("INVALID_ARGUMENT", "INVALID_JSON")
    assert "nests deeper than" in nested["message"]
    deep_input: Any = 1
    for _ in range(200):
        deep_input = {"a": deep_input}
    deep = error_of(
        call(
            secured,
            "POST",
            "/v1/signal-with-start",
            keys.operator,
            data=json.dumps(
                {
                    "signal_name": "go",
                    "start": {"workflow_type": "two_signals", "input": deep_input},
                }
            ),
        ),
        400,
    )
    assert "nests deeper than" in deep["message"]
    # As deep as a body may be, the payload's own check names the field.
    at_limit: Any = 1
    for _ in range(33):
        at_limit = {"a": at_limit}
    payload = error_of(
        call(
            secured,
            "POST",
            "/v1/workflows",
            keys.operator,
            json={"workflow_type": "two_signals", "input": at_limit},
        ),
        400,
    )
    assert payload["reason"] == "INVALID_REQUEST"
    assert payload["message"].startswith("input nests deeper than 32 levels")


def test_crafted_page_tokens_are_invalid_arguments_in_the_apis_words(
    secured: Cluster, keys: Keys
) -> None:
    for workflow_id in ("paged-1", "paged-2"):
        start_waiting_run(secured, keys, workflow_id)
    forged = encode_page_token(10**20)  # decodes, but is no position a query can take
    for path in ("/v1/workflows", "/v1/workflows/paged-1/history"):
        for token in ("A" * 7000, forged, "not base64!", encode_page_token(0)[:-1]):
            answer = call(secured, "GET", path, keys.reader, params={"page_token": token})
            error = error_of(answer, 400)
            assert (error["code"], error["reason"]) == ("INVALID_ARGUMENT", "INVALID_PAGE_TOKEN")
            assert "next_page_token" in error["message"]
            assert "bigint" not in answer.text and "psycopg" not in answer.text
    # A token the API gave still turns the page.
    first = call(secured, "GET", "/v1/workflows", keys.reader, params={"page_size": 1}).json()
    assert first["next_page_token"]
    second = call(
        secured,
        "GET",
        "/v1/workflows",
        keys.reader,
        params={"page_size": 1, "page_token": first["next_page_token"]},
    )
    assert second.status_code == 200, second.text
    assert second.json()["workflows"] != first["workflows"]


def test_crafted_resume_points_of_the_feed_are_invalid_arguments(
    secured: Cluster, keys: Keys
) -> None:
    start_waiting_run(secured, keys, "resume-1")
    for raw in ("9" * 8000, "9" * 30, "9223372036854775808", "\u00b2", "-1", "1e3"):
        for where in ("header", "query"):
            if where == "header":
                answer = feed(secured, keys.reader, "resume-1", **{"Last-Event-ID": raw})
            else:
                answer = call(
                    secured,
                    "GET",
                    "/v1/workflows/resume-1/events",
                    keys.reader,
                    params={"after_event_id": raw},
                )
            error = error_of(answer, 400)
            assert error["code"] == "INVALID_ARGUMENT", (raw, where)
            assert "Last-Event-ID" in error["message"] and len(error["message"]) < 300
    with feed(secured, keys.reader, "resume-1", **{"Last-Event-ID": "1"}) as resumed:
        assert resumed.status_code == 200
        assert next(resumed.iter_lines()) == b"id: 2"


def test_page_tokens_are_checked_as_history_issues_them() -> None:
    for position in (0, 1, 4242, 2**63 - 1):
        validate.page_token(encode_page_token(position))
    validate.page_token("")
    for token in (
        encode_page_token(2**63),
        "A" * (MAX_PAGE_TOKEN_LENGTH + 1),
        "cDox\n",
        "cTox",  # "q:1"
        encode_page_token(12).rstrip("="),  # unpadded
    ):
        with pytest.raises(ApiError, match="page_token") as refused:
            validate.page_token(token)
        assert refused.value.reason == "INVALID_PAGE_TOKEN"
