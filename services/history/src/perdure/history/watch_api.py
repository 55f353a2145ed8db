"""The live half of the public API as history serves it: WatchWorkflow, GetWorkflowResult and
ReadStream. Each reads from its cursor, then waits for the commit feed (commit_feed.py) to say
the run changed, on whichever replica the commit was made; never a fixed polling interval."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.convert import seconds_of
from perdure.common.stream_names import stream_name
from perdure.history import convert
from perdure.history.commit_feed import CommitFeed
from perdure.history.journal import Journal
from perdure.history.live import is_closed
from perdure.history.model import RunStatus
from perdure.history.validation import run_key
from perdure.history.workflow_api import public
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]
MAX_RESULT_WAIT = 300.0  # seconds a GetWorkflowResult may wait
ANSWER_MARGIN = 0.5  # seconds a long poll's answer has to reach its caller before its deadline


class WatchApi:
    """HistoryService's pushed reads."""

    _journal: Journal
    _feed: CommitFeed

    @errors.streaming
    async def WatchWorkflow(
        self, request: hpb.WatchWorkflowRequest, context: Context
    ) -> AsyncIterator[hpb.WatchWorkflowResponse]:
        r = request.request
        if r.after_event_id < 0:
            raise errors.invalid_argument("after_event_id must be 0 or an event id")
        key = run_key(r)
        async with self._feed.watch(key) as watch:
            row = await self._journal.find_run(key, r.run_id)
            run_id, cursor, status = row["run_id"], r.after_event_id, None
            while True:
                view = await self._journal.view(run_id, cursor)
                self._feed.follow(watch, view.key)
                message = api.WatchWorkflowResponse(events=view.events)
                if view.row["status"] != status:
                    status = view.row["status"]
                    message.workflow.CopyFrom(public(view.info))
                if view.events or message.HasField("workflow"):
                    yield hpb.WatchWorkflowResponse(response=message)
                if view.events:
                    cursor = view.events[-1].event_id
                if view.more:
                    continue
                if view.closed:
                    closed = api.WatchWorkflowResponse(workflow=public(view.info), closed=True)
                    yield hpb.WatchWorkflowResponse(response=closed)
                    return
                await watch.changed()

    @errors.unary
    async def GetWorkflowResult(
        self, request: hpb.GetWorkflowResultRequest, context: Context
    ) -> hpb.GetWorkflowResultResponse:
        r = request.request
        wait = seconds_of("wait", r.wait) if r.HasField("wait") else 0.0
        if not 0 <= wait <= MAX_RESULT_WAIT:
            raise errors.invalid_argument(
                f"wait must be 0 to {MAX_RESULT_WAIT:g} seconds, not {wait:g}"
            )
        remaining = context.time_remaining()
        if remaining is not None:
            wait = min(wait, max(remaining - ANSWER_MARGIN, 0.0))  # before the caller gives up
        deadline = time.monotonic() + wait
        key = run_key(r)
        async with self._feed.watch(key, status_only=True) as watch:
            row = await self._journal.find_run(key, r.run_id)
            while True:
                self._feed.follow(watch, row["run_key"])
                closed = is_closed(row)
                if closed and not r.run_id and row["status"] == RunStatus.CONTINUED_AS_NEW:
                    row = await self._journal.run_by_id(row["next_run_id"])
                    continue  # the chain goes on: wait for the run that ends it
                left = deadline - time.monotonic()
                if closed or left <= 0:
                    info = public(convert.workflow_info(row))
                    return hpb.GetWorkflowResultResponse(
                        response=api.GetWorkflowResultResponse(workflow=info, closed=closed)
                    )
                await watch.changed(left)
                run_id = row["run_id"]
                row = watch.closed_run(run_id) or await self._journal.run_by_id(run_id)

    @errors.streaming
    async def ReadStream(
        self, request: hpb.ReadStreamRequest, context: Context
    ) -> AsyncIterator[hpb.ReadStreamResponse]:
        r = request.request
        if r.after_seq < 0:
            raise errors.invalid_argument("after_seq must be 0 or a frame's seq")
        stream = stream_name(r.stream)
        key = run_key(r)
        async with self._feed.watch(key, stream=stream) as watch:
            row = await self._journal.find_run(key, r.run_id)
            run_id, cursor, answered = row["run_id"], r.after_seq, False
            while True:
                run, frames = await self._journal.frames_page(run_id, stream, cursor)
                if frames:
                    cursor, answered = frames[-1].seq, True
                    yield hpb.ReadStreamResponse(response=api.ReadStreamResponse(frames=frames))
                    continue
                if not r.follow:
                    return
                self._feed.follow(watch, run["run_key"])
                if is_closed(run):
                    end = api.ReadStreamResponse(end=True, status=RunStatus(run["status"]).proto)
                    yield hpb.ReadStreamResponse(response=end)
                    return
                if not answered:  # the stream is open: a relay (the HTTP feed) can say so now
                    answered = True
                    yield hpb.ReadStreamResponse(response=api.ReadStreamResponse())
                await watch.changed()
                # Frames stored by this process come with the wake-up: no read for them.
                while (handed := watch.handed_after(cursor)) is not None:
                    if handed:
                        cursor = handed[-1].seq
                        yield hpb.ReadStreamResponse(response=api.ReadStreamResponse(frames=handed))
                    await watch.changed()
