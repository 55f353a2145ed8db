"""JournalClient: one lease's journal calls on the worker's session stream (_session), with
history's refusals turned into the SDK's errors."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import Message

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
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
# Records that append no event to the journal.
_NO_EVENT = (jpb.RecordHeartbeatRequest, jpb.EmitFramesRequest)
# History decided the request itself is wrong: the same request would be refused again.
_REJECTED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)


class JournalClient:
    """The journal calls of one lease; a stale fence becomes LeaseLostError."""

    def __init__(
        self, session: JournalSession, workflow_id: str, fence: int, lease_proof: bytes = b""
    ) -> None:
        self.session = session
        self.workflow_id = workflow_id
        self.fence = fence
        self.lease_proof = lease_proof  # the grant's (Task.lease_proof), sent with the load
        # The id of the latest event the code reached (replayed or recorded), and the payload
        # bytes of the calls it reached: what ctx.info reports, the same on every replay and
        # on a run resumed from the cache (a later lease's client takes them over: carry_on).
        self.reached = 1  # WORKFLOW_STARTED
        self.reached_bytes = 0

    def reach(self, event_id: int, payload_bytes: int = 0) -> None:
        """The code reached the journal's event `event_id` (a call replayed or recorded), whose
        payloads are `payload_bytes` long."""
        self.reached = max(self.reached, event_id)
        self.reached_bytes += payload_bytes

    def carry_on(self, earlier: JournalClient) -> None:
        """Go on from where an earlier lease's client of the same run had reached."""
        self.reached = max(self.reached, earlier.reached)
        self.reached_bytes = earlier.reached_bytes

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
        response = await self.call(request)
        if not isinstance(request, _NO_EVENT):  # the others append an event
            self.reach(
                getattr(response, "event_id", 0) or self.reached + 1, _payload_bytes(request)
            )
        return response

    async def load(self, after_event_id: int = 0) -> jpb.LoadJournalResponse:
        """Load the journal (the events after `after_event_id`: those since a kept position),
        fencing out every earlier holder: every page of it, as one response (the first page's
        run, clock, progress and previous fence, and every event)."""
        request = jpb.LoadJournalRequest(
            workflow_id=self.workflow_id,
            fence=self.fence,
            after_event_id=after_event_id,
            lease_proof=self.lease_proof,
        )
        loaded: jpb.LoadJournalResponse = await self.call(request)
        page = loaded
        while page.more and page.events:
            request.after_event_id = page.events[-1].event_id
            request.later_page = True
            page = await self.call(request)
            loaded.events.extend(page.events)
            loaded.history_length = page.history_length
            loaded.history_bytes = page.history_bytes
        loaded.more = False
        return loaded

    async def payload_of(self, event: wf.HistoryEvent) -> Payload:
        """An event's payload: inline, or fetched by its reference (LoadPayload) only now that
        the replay needs it, and not kept."""
        if not event.HasField("payload_ref"):
            return event.payload
        request = jpb.LoadPayloadRequest(
            workflow_id=self.workflow_id, fence=self.fence, sha256=event.payload_ref.sha256
        )
        loaded: jpb.LoadPayloadResponse = await self.call(request)
        return loaded.payload


def _payload_bytes(request: Message) -> int:
    """The bytes of the payloads a record carries (its output, value, input...)."""
    return sum(len(value.data) for _, value in request.ListFields() if isinstance(value, Payload))
