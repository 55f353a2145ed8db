"""What a worker says about its cache of suspended runs: a Hello's sticky_id is checked, and a
TaskDone's sticky is taken only where it can mean something."""

from __future__ import annotations

import grpc
import pytest

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.common.errors import ApiError
from perdure.scheduler.dispatcher import Session, _keeps
from perdure.scheduler.handlers import _session_from_hello
from perdure.scheduler.model import Lease


def hello(sticky_id: str) -> tpb.ConnectRequest:
    return tpb.ConnectRequest(
        hello=tpb.Hello(
            identity="w", task_queue="q", workflow_types=["t"], capacity=2, sticky_id=sticky_id
        )
    )


def test_a_hello_names_its_workers_cache() -> None:
    assert _session_from_hello(hello("3f2a")).sticky_id == "3f2a"
    assert _session_from_hello(hello("")).sticky_id == ""  # it keeps nothing


@pytest.mark.parametrize("sticky_id", ["x" * 101, "line\nbreak", "nul\x00"])
def test_a_sticky_id_too_long_or_unprintable_is_refused(sticky_id: str) -> None:
    with pytest.raises(ApiError) as refused:
        _session_from_hello(hello(sticky_id))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "hello.sticky_id must be at most 100 printable characters" in refused.value.message


def test_sticky_is_ignored_where_it_cannot_mean_anything() -> None:
    session = Session("w", "q", ["t"], [], capacity=2, sticky_id="w1")
    run, step = Lease("wf", "", 3), Lease("wf", "s", 3)
    assert _keeps(session, run, unfinished=False, sticky=True, timeout=1.0) == "w1"
    assert _keeps(session, run, unfinished=False, sticky=False, timeout=1.0) is None
    assert _keeps(session, step, unfinished=False, sticky=True, timeout=1.0) is None
    assert _keeps(session, run, unfinished=True, sticky=True, timeout=1.0) is None
    assert _keeps(session, run, unfinished=False, sticky=True, timeout=0.0) is None  # off
    plain = Session("p", "q", ["t"], [], capacity=2)
    assert _keeps(plain, run, unfinished=False, sticky=True, timeout=1.0) is None
    session.capacity = 0  # draining: its cache is dropped
    assert _keeps(session, run, unfinished=False, sticky=True, timeout=1.0) is None
