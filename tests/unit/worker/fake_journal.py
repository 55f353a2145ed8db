"""An in-memory stand-in for JournalClient, for tests of the replay engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._context import WorkflowContext
from perdure.worker._journal import JournalClient
from perdure.worker._retry import RetryPolicy
from perdure.worker._session import JournalSession

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class FakeJournal(JournalClient):
    """A lease's journal client that records every request instead of sending it; the
    methods named as JournalService's answer like history would, minus the database."""

    def __init__(
        self, workflow_id: str = "wf-1", fence: int = 2, error: BaseException | None = None
    ) -> None:
        super().__init__(cast(JournalSession, None), workflow_id, fence)
        self.error = error
        self.recorded: list[Any] = []
        # Attempt starts (RecordStep with attempt_started) are kept apart: `recorded` lists
        # what the code's calls recorded.
        self.starts: list[jpb.RecordStepRequest] = []
        self.payloads: dict[bytes, Payload] = {}  # by SHA-256, for LoadPayload
        self._sent_ahead: set[int] = set()  # requests listed by send_ahead already

    def send_ahead(self, request: jpb.RecordStepRequest, answered: Callable[[Any], None]) -> None:
        # Listed at once (a test reads what a step recorded right after it); answered later,
        # from the loop, as the real client is.
        super().send_ahead(request, answered)
        self._sent_ahead.add(id(request))
        self._keep(request)

    async def _call(self, request: Any) -> Any:
        if self.error is not None:
            raise self.error
        if id(request) in self._sent_ahead:  # listed already (and alive until answered)
            self._sent_ahead.discard(id(request))
            copy = request
        else:
            copy = self._keep(request)
        return getattr(self, request.DESCRIPTOR.name.removesuffix("Request"))(copy)

    def _keep(self, request: Any) -> Any:
        copy = type(request)()
        copy.CopyFrom(request)
        started = isinstance(copy, jpb.RecordStepRequest) and copy.attempt_started
        (self.starts if started else self.recorded).append(copy)
        return copy

    def steps(self) -> list[jpb.RecordStepRequest]:
        return [r for r in self.recorded if isinstance(r, jpb.RecordStepRequest)]

    def RecordStep(self, request: jpb.RecordStepRequest) -> jpb.RecordStepResponse:
        response = jpb.RecordStepResponse()
        if request.HasField("retry_delay"):
            response.retry_time.FromDatetime(NOW + request.retry_delay.ToTimedelta())
        return response

    def StartTimer(self, request: jpb.StartTimerRequest) -> jpb.StartTimerResponse:
        response = jpb.StartTimerResponse()
        if request.HasField("fire_time"):
            response.fire_time.CopyFrom(request.fire_time)
        else:
            response.fire_time.FromDatetime(NOW + request.delay.ToTimedelta())
        return response

    def ConsumeSignals(self, request: Any) -> jpb.ConsumeSignalsResponse:
        return jpb.ConsumeSignalsResponse()

    def SetState(self, request: Any) -> jpb.SetStateResponse:
        return jpb.SetStateResponse()

    def RecordPatch(self, request: Any) -> jpb.RecordPatchResponse:
        return jpb.RecordPatchResponse()

    def RecordCancellation(self, request: Any) -> jpb.RecordCancellationResponse:
        return jpb.RecordCancellationResponse()

    def RecordHeartbeat(self, request: Any) -> jpb.RecordHeartbeatResponse:
        return jpb.RecordHeartbeatResponse()

    def EmitFrames(self, request: jpb.EmitFramesRequest) -> jpb.EmitFramesResponse:
        return jpb.EmitFramesResponse(last_seq=request.first_index + len(request.chunks))

    def ScheduleStep(self, request: Any) -> jpb.ScheduleStepResponse:
        return jpb.ScheduleStepResponse()

    def StartChild(self, request: jpb.StartChildRequest) -> jpb.StartChildResponse:
        return jpb.StartChildResponse(child_run_id=f"run-of-{request.child_workflow_id}")

    def LoadPayload(self, request: jpb.LoadPayloadRequest) -> jpb.LoadPayloadResponse:
        return jpb.LoadPayloadResponse(payload=self.payloads[request.sha256])


def make_context(
    journal: FakeJournal,
    events: list[wf.HistoryEvent],
    *,
    workflow_type: str = "flow",
    cancel_requested: bool = False,
    retry: RetryPolicy | None = None,
    clock: datetime | None = None,
    stopping: asyncio.Event | None = None,
) -> WorkflowContext:
    """A context over `events`, loaded at NOW (`clock`: the database clock at the end of the
    load, LoadJournalResponse.clock; unset, as from an older history; `stopping`: set when the
    worker drains)."""
    loaded = jpb.LoadJournalResponse(
        workflow=wf.WorkflowInfo(
            workflow_id=journal.workflow_id,
            workflow_type=workflow_type,
            task_queue="default",
            status=wf.WORKFLOW_STATUS_RUNNING,
            fence=journal.fence,
            cancel_requested=cancel_requested,
        ),
        events=events,
    )
    loaded.now.FromDatetime(NOW)
    if clock is not None:
        loaded.clock.FromDatetime(clock)
    return WorkflowContext(loaded, journal, retry or RetryPolicy(), stopping)
