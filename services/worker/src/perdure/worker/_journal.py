"""JournalClient: one lease's journal calls on the worker's session stream (_session), with
history's refusals turned into the SDK's errors, and a step's outcome sent ahead of its answer.

A step's outcome may go ahead: the code goes on at once, and the lease's next call waits for
that answer before its own returns (an attempt's start is sent beside it, so one round trip
separates two steps instead of two). Nothing the code does in between leaves the worker: it
reaches only its next call, which raises the outcome's error if it was refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(eq=False)
class _Outcome:
    """A step's outcome, which counts in ctx.info from the code's next call on."""

    payload_bytes: int
    event_id: int = 0  # its event, once answered (0 from a history that does not say)
    answered: bool = False
    due: bool = False  # the code made its next call


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
        self._outcomes: list[_Outcome] = []  # step outcomes the code has not reached yet
        self._ahead: list[asyncio.Task[None]] = []  # outcomes sent ahead, not yet awaited

    def reach(self, event_id: int, payload_bytes: int = 0) -> None:
        """The code reached the journal's event `event_id` (a call replayed or recorded), whose
        payloads are `payload_bytes` long."""
        self.reached = max(self.reached, event_id)
        self.reached_bytes += payload_bytes

    def reach_outcome(self, event_id: int, payload_bytes: int) -> None:
        """The code got a step's outcome, recorded as event `event_id`: it counts in ctx.info
        from the code's next call on, replayed or recorded alike."""
        self._outcomes.append(_Outcome(payload_bytes, event_id, answered=True))

    def next_call(self) -> None:
        """The code makes its next call: the step outcomes before it count now (one sent ahead
        counts once answered, which this call waits for before it returns)."""
        for outcome in self._outcomes:
            outcome.due = True
        self._reach_due()

    def _reach_due(self) -> None:
        while self._outcomes and self._outcomes[0].due and self._outcomes[0].answered:
            outcome = self._outcomes.pop(0)
            self.reach(outcome.event_id or self.reached + 1, outcome.payload_bytes)

    def carry_on(self, earlier: JournalClient) -> None:
        """Go on from where an earlier lease's client of the same run had reached."""
        self.reached = max(self.reached, earlier.reached)
        self.reached_bytes = earlier.reached_bytes
        self._outcomes = earlier._outcomes

    async def call(self, request: Any) -> Any:
        """Send a JournalService request of this lease; return its response. The outcomes sent
        ahead are answered first (an attempt's start goes beside them, and waits for them
        before it returns): their error, if any, is raised here."""
        if _starts_attempt(request):
            if self._ahead:
                await asyncio.sleep(0)  # the outcomes sent ahead take their place first
            response = await self._call(request)
            await self.settle()
            return response
        await self.settle()
        return await self._call(request)

    @property
    def sending_ahead(self) -> bool:
        """Whether outcomes sent ahead are waiting for their answers."""
        return bool(self._ahead)

    async def settle(self) -> None:
        """Wait for the outcomes sent ahead; raise the first one's error."""
        while self._ahead:
            await self._ahead.pop(0)

    def send_ahead(self, request: jpb.RecordStepRequest, answered: Callable[[Any], None]) -> None:
        """Send a step's outcome under this lease without waiting for its answer, which goes
        to `answered`; the lease's next call waits for it."""
        request.workflow_id = self.workflow_id
        request.fence = self.fence
        outcome = _Outcome(_payload_bytes(request))
        self._outcomes.append(outcome)

        async def send() -> None:
            try:
                response = await self._call(request)
            except JournalRejectedError as error:  # surely_accepted should have kept it back
                raise JournalUnavailableError(
                    f"an output sent ahead was refused: {error}"
                ) from None
            answered(response)
            outcome.event_id = response.event_id
            outcome.answered = True
            self._reach_due()

        sent = asyncio.create_task(send())
        sent.add_done_callback(_retrieved)  # raised by settle(), or never if the run is dropped
        self._ahead.append(sent)

    async def _call(self, request: Any) -> Any:
        try:
            return await self.session.call(request, JOURNAL_TIMEOUT)
        except JournalCallError as error:
            if error.reason in _LEASE_LOST:
                raise LeaseLostError(error.message or "stale fence") from None
            if error.code in _REJECTED:
                raise JournalRejectedError(f"{error.reason}: {error.message}") from None
            raise JournalUnavailableError(str(error)) from error

    async def record(self, request: Any) -> Any:
        """Send a record under this lease (its workflow id and fence filled in). The code
        reaches the event of a call now, a step's outcome at its next call, and never an
        attempt's start or failure (a replay does not either)."""
        request.workflow_id = self.workflow_id
        request.fence = self.fence
        response = await self.call(request)
        if isinstance(request, _NO_EVENT) or _attempt_record(request):
            return response
        event_id = getattr(response, "event_id", 0)
        if isinstance(request, jpb.RecordStepRequest) and not request.step_task:
            self.reach_outcome(event_id, _payload_bytes(request))
        else:
            self.reach(event_id or self.reached + 1, _payload_bytes(request))
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


def _starts_attempt(request: Any) -> bool:
    return isinstance(request, jpb.RecordStepRequest) and request.attempt_started


def _attempt_record(request: Any) -> bool:
    """An attempt's start, or its failure with another attempt to come: no call's event."""
    return isinstance(request, jpb.RecordStepRequest) and (
        request.attempt_started or request.HasField("retry_delay")
    )


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def _payload_bytes(request: Message) -> int:
    """The bytes of the payloads a record carries (its output, value, input...)."""
    return sum(len(value.data) for _, value in request.ListFields() if isinstance(value, Payload))
