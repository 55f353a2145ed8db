"""The worker's writes on its scheduler stream: a caller cancelled mid-write (a task whose
lease was fenced) must not cancel the stream every task shares, as grpc.aio does when a write
is cancelled; and a TaskDone the stream did not take waits for the next session."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.worker import Worker, workflow


@workflow
async def idle(ctx: Any) -> None:
    return None


class FakeCall:
    """A stream whose writes wait for `flowing`, and which, as grpc.aio's, cancels itself
    when a write is cancelled."""

    def __init__(self) -> None:
        self.flowing = asyncio.Event()
        self.written: list[tpb.ConnectRequest] = []
        self.cancelled = False
        self.broken = False

    async def write(self, message: tpb.ConnectRequest) -> None:
        try:
            await self.flowing.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if self.broken:
            raise grpc.aio.UsageError("the stream is closed")
        self.written.append(message)


class NoLeases:
    """A keeper holding nothing (the TaskDone's lease is forgotten before it is sent)."""

    def refs(self) -> list[tpb.LeaseRef]:
        return []

    def forget(self, lease: tpb.LeaseRef) -> None:
        pass


def _worker(call: FakeCall) -> Worker:
    worker = Worker(workflows=[idle])
    worker._call = call  # type: ignore[assignment]
    return worker


async def test_a_caller_cancelled_mid_write_leaves_the_stream_alone() -> None:
    call = FakeCall()
    worker = _worker(call)
    message = tpb.ConnectRequest(drain=tpb.Drain())
    sending = asyncio.create_task(worker._send(message))
    await asyncio.sleep(0)
    sending.cancel()
    await asyncio.sleep(0)
    call.flowing.set()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert not call.cancelled and call.written == [message]
    assert not worker._write_lock.locked()


async def test_a_task_done_the_stream_did_not_take_waits_with_its_lease_in_the_hello() -> None:
    call = FakeCall()
    call.broken = True
    call.flowing.set()
    worker = _worker(call)
    worker._keeper = NoLeases()  # type: ignore[assignment]
    lease = tpb.LeaseRef(workflow_id="w", fence=3)
    await worker._task_done(tpb.TaskDone(lease=lease))
    assert [done.lease for done in worker._unsent] == [lease]
    assert worker._hello_leases() == [lease]
