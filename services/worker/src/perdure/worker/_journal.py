"""JournalClient: one lease's journal calls on the worker's session stream (_session), with
history's refusals turned into the SDK's errors."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.common.v1.payload_pb2 import Payload, PayloadRef
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.worker._errors import JournalRejectedError, JournalUnavailableError, LeaseLostError
from perdure.worker._session import JournalCallError, JournalSession

JOURNAL_TIMEOUT = 30.0
# History's answers that mean this lease (or step) is not ours to write any more (with worker
# keys, LEASE_NOT_HELD when a worker of another key holds it now; JOURNAL_TOO_LARGE: the run
# was parked as its load was refused).
_LEASE_LOST = (
    "STALE_FENCE",
    "WORKFLOW_CLOSED",
    "STEP_CLOSED",
    "LEASE_NOT_HELD",
)
# History decided the request itself is wrong: the same request would be refused again.
_REJECTED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)


class JournalClient:
    """The journal calls of one lease; a stale fence becomes LeaseLostError."""

    def __init__(self, session: JournalSession, workflow_id: str, fence: int) -> None:
        self.session = session
        self.workflow_id = workflow_id
        self.fence = fence

    async def call(self, request: Any) -> Any:
        """Send a JournalService request of this lease; return its response."""
        try:
            return await self.session.call(request, JOURNAL_TIMEOUT)
        except JournalCallError as error:
            if error.reason in _LEASE_LOST:
                raise LeaseLostError(error.message or "stale fence") from None
            if error.code in _REJECTED:
                raise JournalRejectedError(f"{error.reason}: {error.message}") from None
            raise JournalUnavailableError(str(error)) from error

    async def record(self, request: Any) -> Any:
        """Send a record under this lease (its workflow id and fence filled in)."""
        request.workflow_id = self.workflow_id
        request.fence = self.fence
        return await self.call(request)

    async def load(self, after_event_id: int = 0) -> jpb.LoadJournalResponse:
        """Load the journal (the events after `after_event_id`: those since a kept position),
        fencing out every earlier holder: every page of it, as one response (the first page's
        run, clock, progress and previous fence, and every event)."""
        request = jpb.LoadJournalRequest(
            workflow_id=self.workflow_id, fence=self.fence, after_event_id=after_event_id
        )
        loaded: jpb.LoadJournalResponse = await self.call(request)
        page = loaded
        while page.more:
            request.after_event_id = page.events[-1].event_id
            page = await self.call(request)
            loaded.events.extend(page.events)
            loaded.history_length = page.history_length
            loaded.history_bytes = page.history_bytes
        loaded.more = False
        for event in loaded.events:
            if event.HasField("payload_ref"):
                event.payload.CopyFrom(await self.load_payload(event.payload_ref))
                event.ClearField("payload_ref")
        return loaded

    async def load_payload(self, ref: Payload | PayloadRef) -> Payload:
        """The bytes of a payload an event names by reference (LoadPayload); an inline payload
        as it is."""
        if isinstance(ref, Payload):
            return ref
        request = jpb.LoadPayloadRequest(
            workflow_id=self.workflow_id, fence=self.fence, sha256=ref.sha256
        )
        loaded: jpb.LoadPayloadResponse = await self.call(request)
        return loaded.payload
