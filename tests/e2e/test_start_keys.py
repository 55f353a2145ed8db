"""Debounced and singleton starts, end to end: starts with one debounce key inside its window
make one run, with the last input, whose code runs only a window after the last start; a start
after the run began makes a new one; concurrent starts with one key make one run; bad keys and
windows are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import grpc
import psycopg
import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import Client, InvalidRequestError
from perdure.worker._payload import from_payload
from tests.fixtures.cluster import Cluster, wait_until
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.start_key_workflows"
WAIT = 60.0


def db_now(cluster: Cluster) -> datetime:
    with psycopg.connect(cluster.dsn) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


def test_starts_with_one_debounce_key_make_one_run_with_the_last_input(
    shared: Cluster, client: Client
) -> None:
    window = 2.0
    first = client.start_workflow("echo", 1, debounce_key="k-1", debounce_window=window)
    assert first.started and not first.debounced
    second = client.start_workflow("echo", 2, debounce_key="k-1", debounce_window=window)
    before_last = db_now(shared)
    third = client.start_workflow("echo", 3, debounce_key="k-1", debounce_window=window)
    assert {second.workflow_id, third.workflow_id} == {first.workflow_id}
    assert (second.started, second.debounced, third.debounced) == (False, True, True)
    assert second.run_id == first.run_id == third.run_id

    described = client.wait(first.workflow_id, timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
    result = result_of(described)
    assert result["input"] == 3
    assert datetime.fromisoformat(result["began"]) >= before_last + timedelta(seconds=window)
    # The journal says the same: replay sees the last input.
    started = [
        e
        for e in client.history(first.workflow_id)
        if e.event_type == wf.EVENT_TYPE_WORKFLOW_STARTED
    ]
    assert [from_payload(e.payload) for e in started] == [3]
    assert from_payload(described.workflow.input) == 3


def test_a_start_after_the_run_began_makes_a_new_run(client: Client) -> None:
    first = client.start_workflow("echo", "a", debounce_key="k-2", debounce_window=0.3)
    assert result_of(client.wait(first.workflow_id, timeout=WAIT))["input"] == "a"
    later = client.start_workflow("echo", "b", debounce_key="k-2", debounce_window=0.3)
    assert later.started and not later.debounced
    assert later.workflow_id != first.workflow_id
    assert result_of(client.wait(later.workflow_id, timeout=WAIT))["input"] == "b"


def test_concurrent_debounced_starts_make_one_run(client: Client) -> None:
    def start(value: int) -> api.StartWorkflowResponse:
        return client.start_workflow("echo", value, debounce_key="k-3", debounce_window=1.0)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(start, range(8)))
    assert len({a.workflow_id for a in answers}) == 1
    assert sum(a.started for a in answers) == 1
    assert sum(a.debounced for a in answers) == 7
    assert result_of(client.wait(answers[0].workflow_id, timeout=WAIT))["input"] in range(8)


def test_concurrent_singleton_starts_make_one_open_run(shared: Cluster, client: Client) -> None:
    def start(value: int) -> api.StartWorkflowResponse:
        return client.start_workflow("long_wait", value, singleton_key="only-one")

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(start, range(8)))
    assert len({a.workflow_id for a in answers}) == 1
    assert sum(a.started for a in answers) == 1
    assert sum(a.singleton for a in answers) == 7
    with psycopg.connect(shared.dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM history.workflows WHERE singleton_key = 'only-one' "
            "AND status IN ('RUNNING', 'WAITING')"
        ).fetchone()
    assert row == (1,)

    # Once it closes, the key starts a new run.
    client.terminate(answers[0].workflow_id, reason="next")
    again = client.start_workflow("long_wait", 9, singleton_key="only-one")
    assert again.started and again.workflow_id != answers[0].workflow_id
    client.terminate(again.workflow_id)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"debounce_key": "k", "debounce_window": 0.0}, "debounce_window must be more than 0"),
        ({"debounce_key": "k", "debounce_window": -1.0}, "debounce_window must be more than 0"),
        ({"debounce_key": "k", "debounce_window": 2 * 86400.0}, "at most one day"),
        ({"debounce_key": "k" * 256, "debounce_window": 1.0}, "debounce_key must be printable"),
        ({"singleton_key": "s" * 256}, "singleton_key must be printable"),
        ({"debounce_window": 1.0}, "debounce_window needs debounce_key"),
        ({"debounce_key": "k"}, "debounce_key needs debounce_window"),
    ],
)
def test_bad_keys_are_invalid_argument(
    client: Client, keys: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        client.start_workflow("echo", 1, **keys)  # type: ignore[arg-type]
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in raised.value.message


def test_the_cli_starts_with_keys(shared: Cluster, client: Client) -> None:
    def start(value: int) -> dict[str, object]:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "perdure.cli",
                "workflow",
                "start",
                "echo",
                "--input",
                str(value),
                "--debounce-key",
                "cli-key",
                "--debounce-window",
                "1500ms",
                "--address",
                shared.gateway,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        answer: dict[str, object] = json.loads(done.stdout)
        return answer

    first, second = start(1), start(2)
    assert second["workflow_id"] == first["workflow_id"] and second.get("debounced") is True
    described = client.wait(str(first["workflow_id"]), timeout=WAIT)
    assert result_of(described)["input"] == 2


def test_a_singleton_chain_keeps_its_key_when_it_continues_as_new(client: Client) -> None:
    first = client.start_workflow("continues_once", {}, singleton_key="chained")
    wait_until(
        lambda: client.describe(first.workflow_id).workflow.run_number == 2,
        WAIT,
        "the run continued as new",
    )
    again = client.start_workflow("continues_once", {}, singleton_key="chained")
    assert (again.workflow_id, again.singleton, again.started) == (first.workflow_id, True, False)
    assert again.run_id != first.run_id
    client.terminate(first.workflow_id)
