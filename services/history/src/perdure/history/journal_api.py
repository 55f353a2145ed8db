"""The worker protocol's journal calls (JournalService's unary methods), each under a lease:
the run's, or a remote step's own. The same calls arrive multiplexed on a Session stream
(session.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import grpc

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.common import auth, errors, namespaces
from perdure.common.builds import build_id_of
from perdure.common.convert import datetime_of, seconds_of, timestamp
from perdure.common.flow import step_usage_json
from perdure.common.lease_proofs import LeaseProofs
from perdure.common.payload import validate_payload
from perdure.common.stream_names import stream_name
from perdure.common.text import require_storable
from perdure.history import fencing
from perdure.history.appends import call_params
from perdure.history.approvals import approval_request
from perdure.history.convert import dict_to_failure
from perdure.history.journal import Journal
from perdure.history.model import (
    Appended,
    EventType,
    Lease,
    Outcome,
    RemoteStep,
    StepAttempt,
    StepRecord,
)
from perdure.history.retries import retry_message, retry_policy
from perdure.history.streams import MAX_CHUNKS
from perdure.history.validation import (
    call_of,
    child_start,
    patch_of,
    require_state_key,
    require_task_queue,
    run_lease,
    started_at,
    step_flow,
    step_lease,
    step_outcome,
    time_limit,
    wait_of,
)
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

Context = grpc.aio.ServicerContext[Any, Any]
LEASE_CHECK_TIMEOUT = 10.0
SHA256_BYTES = 32


class JournalApi:
    """JournalService's unary calls."""

    def __init__(
        self,
        journal: Journal,
        scheduler: sgrpc.SchedulerServiceStub,
        proofs: LeaseProofs | None = None,
    ) -> None:
        self._journal = journal
        self._scheduler = scheduler  # who holds which lease
        self._proofs = proofs  # or the scheduler's signature on its grant (lease_proofs.py)

    async def _require_lease(self, lease: Lease, proof: bytes) -> None:
        """With a worker key in force, only the session the scheduler granted this lease to
        (a session of the same key) may take it up: a load is what raises the fence mark. The
        grant's proof says so for its key; without a valid one, the scheduler is asked."""
        if auth.current_principal.get() is None:
            return
        if self._proofs is not None and self._proofs.proves(
            proof, lease.workflow_id, lease.step_id, lease.fence, lease.key
        ):
            return
        check = spb.CheckLeaseRequest(
            workflow_id=lease.workflow_id,
            step_id=lease.step_id,
            fence=lease.fence,
            key_id=lease.key,
        )
        answer = await self._scheduler.CheckLease(check, timeout=LEASE_CHECK_TIMEOUT)
        if not answer.held:
            raise fencing.lease_not_held(lease)

    @errors.unary
    async def LoadJournal(
        self, request: jpb.LoadJournalRequest, context: Context
    ) -> jpb.LoadJournalResponse:
        lease = run_lease(request)
        build_id = build_id_of("build_id", request.build_id)
        if request.after_event_id < 0:
            raise errors.invalid_argument(
                "after_event_id must be 0 (from the start) or the id of an event already loaded"
            )
        if request.later_page and not request.after_event_id:
            raise errors.invalid_argument(
                "later_page needs after_event_id: the last event of the page before"
            )
        loaded = None
        if request.later_page:  # under the fence that loaded the run; else a load
            loaded = await self._journal.next_page(lease, request.after_event_id)
        if loaded is None:
            await self._require_lease(lease, request.lease_proof)
            loaded = await self._journal.load(lease, request.after_event_id, build_id)
        return jpb.LoadJournalResponse(
            workflow=loaded.info,
            events=loaded.events,
            now=timestamp(loaded.now),
            clock=timestamp(loaded.clock),
            progress=[
                jpb.StepProgress(
                    step_id=row["step_id"],
                    attempt=row["attempt"],
                    details=row["details"],
                    update_time=timestamp(row["updated_at"]),
                )
                for row in loaded.progress
            ],
            more=loaded.more,
            previous_fence=loaded.previous_fence,
            history_length=loaded.history_length,
            history_bytes=loaded.history_bytes,
        )

    @errors.unary
    async def LoadPayload(
        self, request: jpb.LoadPayloadRequest, context: Context
    ) -> jpb.LoadPayloadResponse:
        lease = run_lease(request)
        if len(request.sha256) != SHA256_BYTES:
            raise errors.invalid_argument(
                f"sha256 must be the {SHA256_BYTES}-byte digest of an event's payload_ref, not "
                f"{len(request.sha256)} bytes"
            )
        payload = await self._journal.load_payload(lease, request.sha256)
        return jpb.LoadPayloadResponse(payload=payload)

    @errors.unary
    async def RecordStep(
        self, request: jpb.RecordStepRequest, context: Context
    ) -> jpb.RecordStepResponse:
        if request.unless_cancel_requested and not request.attempt_started:
            raise errors.invalid_argument(
                "unless_cancel_requested goes with attempt_started: it keeps an attempt's start "
                "out of the journal of a run with a cancel request"
            )
        if request.HasField("usage") and not request.step_task:
            raise errors.invalid_argument(
                "usage goes with step_task: a remote step's attempt reports what it used with "
                "its outcome (a local step's usage is not journaled)"
            )
        if request.step_task:
            appended = await self._record_step_task(request)
        elif request.attempt_started:
            appended = await self._record_attempt_started(request)
        else:
            call = call_of(request)
            appended = await self._journal.record(call, step_outcome(request))
        return jpb.RecordStepResponse(
            event_id=appended.event_id,
            retry_time=timestamp(appended.due_at),
            cancel_requested=appended.cancel_requested,
        )

    async def _record_attempt_started(self, request: jpb.RecordStepRequest) -> Appended:
        """Journal that an attempt begins (before its body runs): it counts even if its worker
        dies. Sent again (its answer lost), it changes nothing a replay reads."""
        call = call_of(request)
        if request.WhichOneof("outcome") is not None or request.HasField("retry_delay"):
            raise errors.invalid_argument(
                "attempt_started goes without an outcome and retry_delay: record the outcome of "
                "the attempt in a RecordStep of its own once it ends"
            )
        if request.attempt < 1:
            raise errors.invalid_argument("attempt must be 1 or more with attempt_started")
        record = StepRecord(
            EventType.STEP_ATTEMPT_STARTED,
            positioned=False,
            attempt=request.attempt,
            started_at=started_at(request),
            unless_cancel=request.unless_cancel_requested,
        )
        return await self._journal.record(call, record)

    async def _record_step_task(self, request: jpb.RecordStepRequest) -> Appended:
        lease = step_lease(request)
        if request.attempt_started:
            raise errors.invalid_argument(
                "a step task's attempt is started by LoadStep: leave attempt_started unset"
            )
        outcome = step_outcome(request)
        attempt = StepAttempt(
            lease=lease,
            attempt=max(request.attempt, 1),
            event_type=outcome.event_type,
            payload=outcome.payload,
            failure=outcome.failure,
            retry_in=outcome.due_in,
            started_at=outcome.started_at,
            usage=step_usage_json("usage", request.usage) if request.HasField("usage") else None,
        )
        return await self._journal.record_step_attempt(attempt)

    @errors.unary
    async def ScheduleStep(
        self, request: jpb.ScheduleStepRequest, context: Context
    ) -> jpb.ScheduleStepResponse:
        call = call_of(request)
        require_task_queue(request.task_queue)
        input_value = validate_payload("input", request.input)
        timeout = time_limit(request, "timeout")
        step = RemoteStep(
            step_type=request.step_name,
            # The queue is named in the run's namespace, whose workers alone serve it.
            task_queue=namespaces.qualify(
                namespaces.namespace_of(request.workflow_id), request.task_queue
            ),
            input_value=input_value,
            retry=retry_policy(request),
            timeout_seconds=timeout,
            heartbeat_timeout_seconds=time_limit(request, "heartbeat_timeout"),
            flow=step_flow(request),
        )
        appended = await self._journal.schedule_step(call, step)
        return jpb.ScheduleStepResponse(
            event_id=appended.event_id, cancel_requested=appended.cancel_requested
        )

    @errors.unary
    async def StartChild(
        self, request: jpb.StartChildRequest, context: Context
    ) -> jpb.StartChildResponse:
        call = call_of(request)
        child = child_start(request)
        appended, run_id, failure = await self._journal.start_child(call, child)
        return jpb.StartChildResponse(
            event_id=appended.event_id,
            cancel_requested=appended.cancel_requested,
            child_run_id=run_id,
            failure=dict_to_failure(failure),
        )

    @errors.unary
    async def LoadStep(
        self, request: jpb.LoadStepRequest, context: Context
    ) -> jpb.LoadStepResponse:
        lease = step_lease(request)
        await self._require_lease(lease, request.lease_proof)
        task = await self._journal.load_step(lease)
        response = jpb.LoadStepResponse(
            workflow_type=task.workflow_type,
            step_type=task.step_type,
            input=task.input_value,
            attempt=task.attempt,
            retry=retry_message(task.retry),
            attempt_lost=task.attempt_lost,
        )
        if task.timeout_seconds is not None:
            response.timeout.FromTimedelta(timedelta(seconds=task.timeout_seconds))
        if task.heartbeat_timeout_seconds is not None:
            seconds = task.heartbeat_timeout_seconds
            response.heartbeat_timeout.FromTimedelta(timedelta(seconds=seconds))
        if task.heartbeat_details is not None:
            response.heartbeat_details.CopyFrom(task.heartbeat_details)
        return response

    @errors.unary
    async def StartTimer(
        self, request: jpb.StartTimerRequest, context: Context
    ) -> jpb.StartTimerResponse:
        call = call_of(request)
        fire = request.WhichOneof("fire")
        if fire is None:
            raise errors.invalid_argument("one of delay or fire_time is required")
        if fire == "delay":
            appended = await self._journal.start_timer(
                call, due_in=seconds_of("delay", request.delay)
            )
        else:
            appended = await self._journal.start_timer(
                call, due_at=datetime_of("fire_time", request.fire_time)
            )
        return jpb.StartTimerResponse(
            fire_time=timestamp(appended.due_at),
            cancel_requested=appended.cancel_requested,
            event_id=appended.event_id,
        )

    @errors.unary
    async def ConsumeSignals(
        self, request: jpb.ConsumeSignalsRequest, context: Context
    ) -> jpb.ConsumeSignalsResponse:
        call = call_of(request)
        if not request.signal_name:
            raise errors.invalid_argument("signal_name is required")
        require_storable("signal_name", request.signal_name)
        if request.timed_out:
            if request.event_ids:
                raise errors.invalid_argument("a timed-out wait consumes no signals")
            record = StepRecord(EventType.SIGNAL_TIMED_OUT, name=request.signal_name)
            appended = await self._journal.record(call, record)
        else:
            appended = await self._journal.consume_signals(
                call,
                request.signal_name,
                list(request.event_ids),
                validate_payload("result", request.result),
            )
        return jpb.ConsumeSignalsResponse(
            cancel_requested=appended.cancel_requested, event_id=appended.event_id
        )

    @errors.unary
    async def SetState(
        self, request: jpb.SetStateRequest, context: Context
    ) -> jpb.SetStateResponse:
        call = call_of(request)
        require_state_key(request.key)
        value = validate_payload("value", request.value)
        record = StepRecord(EventType.STATE_UPDATED, name=request.key, payload=value)
        appended = await self._journal.record(call, record)
        return jpb.SetStateResponse(
            cancel_requested=appended.cancel_requested, event_id=appended.event_id
        )

    @errors.unary
    async def RecordCancellation(
        self, request: jpb.RecordCancellationRequest, context: Context
    ) -> jpb.RecordCancellationResponse:
        record = StepRecord(EventType.CANCELLATION_DELIVERED)
        appended = await self._journal.record(call_of(request), record)
        return jpb.RecordCancellationResponse(event_id=appended.event_id)

    @errors.unary
    async def RecordPatch(
        self, request: jpb.RecordPatchRequest, context: Context
    ) -> jpb.RecordPatchResponse:
        appended = await self._journal.record_patch(*patch_of(request))
        return jpb.RecordPatchResponse(
            cancel_requested=appended.cancel_requested, event_id=appended.event_id
        )

    @errors.unary
    async def RecordHeartbeat(
        self, request: jpb.RecordHeartbeatRequest, context: Context
    ) -> jpb.RecordHeartbeatResponse:
        # The run's lease, or with step_task the remote step's own.
        lease = step_lease(request)
        if not request.step_task:
            lease = Lease(lease.workflow_id, lease.fence, lease.key)
        details = None
        if request.HasField("details"):
            details = validate_payload("details", request.details)
        cancel_requested = await self._journal.heartbeat(
            lease, request.step_id, max(request.attempt, 1), details
        )
        return jpb.RecordHeartbeatResponse(cancel_requested=cancel_requested)

    @errors.unary
    async def EmitFrames(
        self, request: jpb.EmitFramesRequest, context: Context
    ) -> jpb.EmitFramesResponse:
        # Fenced as a heartbeat: the run's lease, or with step_task the remote step's own.
        lease = step_lease(request)
        if not request.step_task:
            lease = Lease(lease.workflow_id, lease.fence, lease.key)
        if request.attempt < 1:
            raise errors.invalid_argument("attempt must be the running attempt, from 1")
        if request.first_index < 0:
            raise errors.invalid_argument("first_index must be 0 or more")
        if not 1 <= len(request.chunks) <= MAX_CHUNKS:
            raise errors.invalid_argument(
                f"chunks must hold 1 to {MAX_CHUNKS} chunks, not {len(request.chunks)}"
            )
        chunks = [validate_payload(f"chunks[{i}]", chunk) for i, chunk in enumerate(request.chunks)]
        emitted = await self._journal.emit(
            lease,
            request.step_id,
            request.attempt,
            stream_name(request.stream),
            request.first_index,
            chunks,
        )
        return jpb.EmitFramesResponse(
            last_seq=emitted.last_seq, cancel_requested=emitted.cancel_requested
        )

    @errors.unary
    async def SuspendWorkflow(
        self, request: jpb.SuspendWorkflowRequest, context: Context
    ) -> jpb.SuspendWorkflowResponse:
        lease = run_lease(request)
        await self._journal.suspend(lease, wait_of(request))
        return jpb.SuspendWorkflowResponse()

    @errors.unary
    async def FinishWorkflow(
        self, request: jpb.FinishWorkflowRequest, context: Context
    ) -> jpb.FinishWorkflowResponse:
        lease = run_lease(request)
        outcome = request.WhichOneof("outcome")
        if outcome is None:
            raise errors.invalid_argument(
                "one of result, failure, park, cancelled or continue_as_new is required"
            )
        if outcome == "result":
            value = validate_payload("result", request.result)
        elif outcome == "continue_as_new":
            value = validate_payload("continue_as_new.input", request.continue_as_new.input)
        else:
            value = getattr(request, outcome)
        status = await self._journal.finish(lease, Outcome(outcome), value)
        return jpb.FinishWorkflowResponse(status=status.proto)

    @errors.unary
    async def RequestApproval(
        self, request: jpb.RequestApprovalRequest, context: Context
    ) -> jpb.RequestApprovalResponse:
        call = call_of(request)
        asked = approval_request(request)
        params = call_params(
            call,
            StepRecord(
                EventType.APPROVAL_REQUESTED,
                payload=asked.details,
                due_in=asked.timeout,
                name=request.name,
            ),
        )
        row = await self._journal.request_approval(params, asked)
        return jpb.RequestApprovalResponse(
            event_id=row["event_id"],
            approval_id=row["approval_id"],
            expire_time=timestamp(row["expires_at"]),
            escalate_time=timestamp(row["escalate_at"]),
            cancel_requested=row["cancel_requested"],
        )
