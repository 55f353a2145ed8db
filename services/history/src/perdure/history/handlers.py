"""gRPC servicers of history: thin adapters from messages to the Journal."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol

import grpc
from opentelemetry.trace import SpanKind, Status, StatusCode

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import auth, errors, limits, namespaces
from perdure.common.convert import datetime_of, seconds_of, timestamp
from perdure.common.limits import StreamCap
from perdure.common.payload import normalized, validate_payload
from perdure.common.text import require_storable
from perdure.history import keys, store
from perdure.history.convert import failure_to_dict
from perdure.history.journal import (
    Appended,
    Call,
    Journal,
    RemoteStep,
    StepAttempt,
    lease_not_held,
    page_size,
)
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.scheduler.v1 import scheduler_service_pb2 as spb
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc
from perdure.telemetry.propagation import context_from
from perdure.telemetry.rpc import MAX_ITEM_BYTES, multiplexed_call_span

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]
JOURNAL_SERVICE = jpb.DESCRIPTOR.services_by_name["JournalService"].full_name
MAX_KEY_LENGTH = 200
MAX_TASK_QUEUE_LENGTH = 200
LEASE_CHECK_TIMEOUT = 10.0
_TIMED_WAITS = (wf.WAIT_KIND_TIMER, wf.WAIT_KIND_RETRY)  # their `until` wakes them
# A remote step's retry policy when its call sets none (as the SDKs' default).
DEFAULT_RETRY = jpb.RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=5,
)


def _require_workflow_id(workflow_id: str) -> None:
    if not workflow_id:
        raise errors.invalid_argument("workflow_id is required")
    require_storable("workflow_id", workflow_id)
    auth.require_namespace(namespaces.namespace_of(workflow_id))


class _Addressed(Protocol):
    workflow_id: str
    namespace: str


def _run_key(request: _Addressed) -> str:
    """The platform's id of the run a public request names in its namespace."""
    if not request.workflow_id:
        raise errors.invalid_argument("workflow_id is required")
    require_storable("workflow_id", request.workflow_id)
    namespaces.require_public("workflow_id", request.workflow_id)
    return namespaces.qualify(auth.acting_namespace(request.namespace), request.workflow_id)


def _acting_key() -> str:
    """The API key the gateway vouches the call was made with ("" without keys)."""
    principal = auth.current_principal.get()
    return principal.key_id if principal is not None else ""


def _public(info: wf.WorkflowInfo) -> wf.WorkflowInfo:
    """A run's summary as its namespace's callers know it."""
    info.workflow_id = namespaces.split(info.workflow_id)[1]
    return info


def _require_fence(fence: int) -> None:
    if fence <= 0:
        raise errors.invalid_argument("fence must be the positive token of a lease")


class _StepLeaseRequest(Protocol):
    workflow_id: str
    fence: int
    step_id: str


def _require_step_lease(request: _StepLeaseRequest) -> None:
    """A request naming a step under a lease: the workflow's (a heartbeat) or its own."""
    _require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    if not request.step_id:
        raise errors.invalid_argument("step_id is required")
    require_storable("step_id", request.step_id)


class HistoryServicer(hgrpc.HistoryServiceServicer):
    """What the gateway asks of history, after it has validated the request. Public names
    arrive with their namespace and leave without it; inside, runs go by qualified ids."""

    def __init__(self, journal: Journal, key_ring: keys.KeyRing) -> None:
        self._journal = journal
        self._keys = key_ring

    @errors.unary
    async def StartWorkflow(
        self, request: hpb.StartWorkflowRequest, context: Context
    ) -> hpb.StartWorkflowResponse:
        r = request.request
        namespace = namespaces.resolve(r.namespace)
        started, status = await self._journal.start(
            _run_key(r),
            r.workflow_type,
            namespaces.qualify(namespace, r.task_queue),
            normalized(r.input),
            _execution_timeout(r),
        )
        return hpb.StartWorkflowResponse(
            response=api.StartWorkflowResponse(
                workflow_id=r.workflow_id,
                started=started,
                status=f"WORKFLOW_STATUS_{status}",
            )
        )

    @errors.unary
    async def DescribeWorkflow(
        self, request: hpb.DescribeWorkflowRequest, context: Context
    ) -> hpb.DescribeWorkflowResponse:
        described = await self._journal.describe(_run_key(request.request))
        return hpb.DescribeWorkflowResponse(
            response=api.DescribeWorkflowResponse(
                workflow=_public(described.info),
                steps=described.steps,
                current_step=described.current_step,
                pending_signals=described.pending_signals,
                state=described.state,
            )
        )

    @errors.unary
    async def GetWorkflowHistory(
        self, request: hpb.GetWorkflowHistoryRequest, context: Context
    ) -> hpb.GetWorkflowHistoryResponse:
        r = request.request
        events, token = await self._journal.history_page(
            _run_key(r), r.page_size, r.page_token, r.after_event_id
        )
        return hpb.GetWorkflowHistoryResponse(
            response=api.GetWorkflowHistoryResponse(events=events, next_page_token=token)
        )

    @errors.unary
    async def ListWorkflows(
        self, request: hpb.ListWorkflowsRequest, context: Context
    ) -> hpb.ListWorkflowsResponse:
        r = request.request
        status = (
            wf.WorkflowStatus.Name(r.status).removeprefix("WORKFLOW_STATUS_")
            if r.status != wf.WORKFLOW_STATUS_UNSPECIFIED
            else None
        )
        namespace = auth.acting_namespace(r.namespace)
        runs, token = await self._journal.list_page(
            namespace,
            status,
            r.workflow_type or None,
            r.page_size,
            r.page_token,
            namespaces.qualify(namespace, r.workflow_id_prefix) if r.workflow_id_prefix else None,
            stuck=r.stuck,
        )
        return hpb.ListWorkflowsResponse(
            response=api.ListWorkflowsResponse(
                workflows=[_public(run) for run in runs], next_page_token=token
            )
        )

    @errors.unary
    async def SignalWorkflow(
        self, request: hpb.SignalWorkflowRequest, context: Context
    ) -> hpb.SignalWorkflowResponse:
        r = request.request
        accepted = await self._journal.signal(
            _run_key(r), r.signal_name, normalized(r.payload), r.signal_id or None
        )
        return hpb.SignalWorkflowResponse(response=api.SignalWorkflowResponse(accepted=accepted))

    @errors.unary
    async def SignalWithStartWorkflow(
        self, request: hpb.SignalWithStartWorkflowRequest, context: Context
    ) -> hpb.SignalWithStartWorkflowResponse:
        r = request.request
        started, accepted = await self._journal.signal_with_start(
            _run_key(r.start),
            r.start.workflow_type,
            namespaces.qualify(auth.acting_namespace(r.start.namespace), r.start.task_queue),
            normalized(r.start.input),
            r.signal_name,
            normalized(r.payload),
            r.signal_id or None,
            _execution_timeout(r.start),
        )
        return hpb.SignalWithStartWorkflowResponse(
            response=api.SignalWithStartWorkflowResponse(started=started, accepted=accepted)
        )

    @errors.unary
    async def CancelWorkflow(
        self, request: hpb.CancelWorkflowRequest, context: Context
    ) -> hpb.CancelWorkflowResponse:
        r = request.request
        await self._journal.cancel(_run_key(r), r.reason, _acting_key())
        return hpb.CancelWorkflowResponse(response=api.CancelWorkflowResponse())

    @errors.unary
    async def TerminateWorkflow(
        self, request: hpb.TerminateWorkflowRequest, context: Context
    ) -> hpb.TerminateWorkflowResponse:
        r = request.request
        await self._journal.terminate(_run_key(r), r.reason, _acting_key())
        return hpb.TerminateWorkflowResponse(response=api.TerminateWorkflowResponse())

    @errors.unary
    async def QueryWorkflow(
        self, request: hpb.QueryWorkflowRequest, context: Context
    ) -> hpb.QueryWorkflowResponse:
        row = await self._journal.query(_run_key(request.request), request.request.key)
        return hpb.QueryWorkflowResponse(
            response=api.QueryWorkflowResponse(
                value=store.payload_in(row, "payload"), update_time=timestamp(row["created_at"])
            )
        )

    @errors.unary
    async def Authenticate(
        self, request: hpb.AuthenticateRequest, context: Context
    ) -> hpb.AuthenticateResponse:
        principal = await self._keys.authenticate(request.token)
        return hpb.AuthenticateResponse(
            key_id=principal.key_id,
            namespace=principal.namespace,
            role=principal.role,  # type: ignore[arg-type]
            task_queues=principal.task_queues,
        )

    @errors.unary
    async def CreateApiKey(
        self, request: hpb.CreateApiKeyRequest, context: Context
    ) -> hpb.CreateApiKeyResponse:
        r = request.request
        async with self._keys.connection() as conn:
            key, token = await keys.create(
                conn,
                auth.acting_namespace(""),
                keys.role_of(r.role),
                list(r.task_queues),
                r.name,
                _acting_key(),
            )
        return hpb.CreateApiKeyResponse(response=admin.CreateApiKeyResponse(key=key, token=token))

    @errors.unary
    async def RevokeApiKey(
        self, request: hpb.RevokeApiKeyRequest, context: Context
    ) -> hpb.RevokeApiKeyResponse:
        r = request.request
        if not r.key_id:
            raise errors.invalid_argument("key_id is required")
        require_storable("key_id", r.key_id)
        async with self._keys.connection() as conn:
            revoked = await keys.revoke(conn, auth.acting_namespace(""), r.key_id, _acting_key())
        self._keys.forget(r.key_id)
        return hpb.RevokeApiKeyResponse(response=admin.RevokeApiKeyResponse(revoked=revoked))

    @errors.unary
    async def ListApiKeys(
        self, request: hpb.ListApiKeysRequest, context: Context
    ) -> hpb.ListApiKeysResponse:
        namespace = auth.acting_namespace("")
        async with self._keys.connection() as conn:
            listed = await keys.listed(conn, namespace, request.request.include_revoked)
        return hpb.ListApiKeysResponse(response=admin.ListApiKeysResponse(keys=listed))

    @errors.unary
    async def ListAuditEvents(
        self, request: hpb.ListAuditEventsRequest, context: Context
    ) -> hpb.ListAuditEventsResponse:
        r = request.request
        if not 0 <= r.page_size <= 1000:
            raise errors.invalid_argument("page_size must be between 0 and 1000")
        async with self._keys.connection() as conn:
            events, token = await keys.audit_page(
                conn,
                auth.acting_namespace(""),
                page_size(r.page_size),
                r.page_token,
            )
        return hpb.ListAuditEventsResponse(
            response=admin.ListAuditEventsResponse(events=events, next_page_token=token)
        )


class _CallRequest(Protocol):
    workflow_id: str
    fence: int
    step_id: str
    step_name: str
    position: int


def _call(request: _CallRequest) -> Call:
    """The lease and code call a worker's record belongs to, validated."""
    _require_workflow_id(request.workflow_id)
    _require_fence(request.fence)
    if not request.step_id or not request.step_name:
        raise errors.invalid_argument("step_id and step_name are required")
    require_storable("step_id", request.step_id)
    require_storable("step_name", request.step_name)
    if request.position < 0:
        raise errors.invalid_argument("position must be zero or more")
    return Call(
        request.workflow_id, request.fence, request.step_id, request.step_name, request.position
    )


def _execution_timeout(start: api.StartWorkflowRequest) -> float | None:
    """A start's execution timeout in seconds (the gateway checked its range); None: unset."""
    if not start.HasField("execution_timeout"):
        return None
    return seconds_of("execution_timeout", start.execution_timeout)


def _started(request: jpb.RecordStepRequest) -> datetime | None:
    return datetime_of("start_time", request.start_time) if request.HasField("start_time") else None


def _retry_policy(request: jpb.ScheduleStepRequest) -> dict[str, Any]:
    """The call's retry policy (the default when unset), validated, as stored."""
    retry = request.retry if request.HasField("retry") else DEFAULT_RETRY
    initial = seconds_of("retry.initial_interval", retry.initial_interval)
    maximum = seconds_of("retry.maximum_interval", retry.maximum_interval)
    if initial < 0 or maximum < 0:
        raise errors.invalid_argument("retry intervals must not be negative")
    if not retry.backoff_coefficient >= 1:
        raise errors.invalid_argument("retry.backoff_coefficient must be at least 1")
    if retry.maximum_attempts < 0:
        raise errors.invalid_argument("retry.maximum_attempts must be >= 0 (0: no limit)")
    return {
        "initial_interval": initial,
        "backoff_coefficient": retry.backoff_coefficient,
        "maximum_interval": maximum,
        "maximum_attempts": retry.maximum_attempts,
        "non_retryable_error_types": list(retry.non_retryable_error_types),
    }


def _limit(request: jpb.ScheduleStepRequest, field: str) -> float | None:
    """A per-attempt time limit of a remote step's call, in seconds; None when unset."""
    if not request.HasField(field):
        return None
    seconds = seconds_of(field, getattr(request, field))
    if seconds <= 0:
        raise errors.invalid_argument(f"{field} must be positive (unset: no limit)")
    return seconds


def _retry_message(stored: dict[str, Any]) -> jpb.RetryPolicy:
    return jpb.RetryPolicy(
        initial_interval=timedelta(seconds=stored["initial_interval"]),
        backoff_coefficient=stored["backoff_coefficient"],
        maximum_interval=timedelta(seconds=stored["maximum_interval"]),
        maximum_attempts=stored["maximum_attempts"],
        non_retryable_error_types=stored["non_retryable_error_types"],
    )


def _outcome(request: jpb.RecordStepRequest) -> tuple[str, dict[str, Any], float | None]:
    """A step record's event type, its payload or failure, and its retry delay (a failed
    attempt), validated."""
    outcome = request.WhichOneof("outcome")
    if outcome is None:
        raise errors.invalid_argument("one of output or failure is required")
    if outcome == "output":
        fields: dict[str, Any] = {"payload": validate_payload("output", request.output)}
    else:
        fields = {"failure": failure_to_dict(request.failure)}
    if not request.HasField("retry_delay"):
        return ("STEP_COMPLETED" if outcome == "output" else "STEP_FAILED"), fields, None
    delay = seconds_of("retry_delay", request.retry_delay)
    if outcome != "failure" or delay < 0:
        raise errors.invalid_argument("retry_delay goes with a failure and must not be negative")
    return "STEP_ATTEMPT_FAILED", fields, delay


class JournalServicer(jgrpc.JournalServiceServicer):
    """The worker protocol's journal calls, each checked against the lease's fence."""

    def __init__(
        self, journal: Journal, call_rate: float, scheduler: sgrpc.SchedulerServiceStub
    ) -> None:
        self._journal = journal
        self._call_rate = call_rate  # per Session stream, calls per second
        self._scheduler = scheduler  # who holds which lease
        self._max_journal_bytes = limits.journal_load_bytes()
        self._session_readers: set[asyncio.Task[None]] = set()

    async def _require_lease(self, workflow_id: str, step_id: str, fence: int) -> None:
        """With a worker key in force, only the session the scheduler granted this lease to
        (a session of the same key) may take it up: a load is what raises the fence mark."""
        principal = auth.current_principal.get()
        if principal is None:
            return
        check = spb.CheckLeaseRequest(
            workflow_id=workflow_id, step_id=step_id, fence=fence, key_id=principal.key_id
        )
        answer = await self._scheduler.CheckLease(check, timeout=LEASE_CHECK_TIMEOUT)
        if not answer.held:
            raise lease_not_held(workflow_id, step_id, fence)

    def close_sessions(self) -> None:
        """Stop taking calls on open sessions; each ends once its calls taken are answered.
        Workers send what is left on a new stream (to another replica, or after a restart)."""
        for reader in self._session_readers:
            reader.cancel()

    @errors.unary
    async def LoadJournal(
        self, request: jpb.LoadJournalRequest, context: Context
    ) -> jpb.LoadJournalResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        await self._require_lease(request.workflow_id, "", request.fence)
        loaded = await self._journal.load(request.workflow_id, request.fence)
        response = jpb.LoadJournalResponse(
            workflow=loaded.info,
            events=loaded.events,
            now=timestamp(loaded.now),
            progress=[
                jpb.StepProgress(
                    step_id=row["step_id"],
                    attempt=row["attempt"],
                    details=row["details"],
                    update_time=timestamp(row["updated_at"]),
                )
                for row in loaded.progress
            ],
        )
        size = response.ByteSize()
        if size > self._max_journal_bytes:
            # It can never be loaded: park it, rather than hand it out again and again.
            raise await self._journal.park_too_large(
                request.workflow_id, request.fence, size, self._max_journal_bytes
            )
        return response

    @errors.unary
    async def RecordStep(
        self, request: jpb.RecordStepRequest, context: Context
    ) -> jpb.RecordStepResponse:
        if request.step_task:
            appended = await self._record_step_task(request)
        elif request.attempt_started:
            appended = await self._record_attempt_started(request)
        else:
            call = _call(request)
            event_type, fields, retry_in = _outcome(request)
            fields.update(attempt=max(request.attempt, 1), started_at=_started(request))
            if retry_in is not None:
                # A failed attempt: the call's position stays free for its final outcome.
                fields.update(positioned=False, due_in=retry_in)
            appended = await self._journal.record(call, event_type, **fields)
        return jpb.RecordStepResponse(
            event_id=appended.event_id,
            retry_time=timestamp(appended.due_at),
            cancel_requested=appended.cancel_requested,
        )

    async def _record_attempt_started(self, request: jpb.RecordStepRequest) -> Appended:
        """Journal that an attempt begins (before its body runs): it counts even if its worker
        dies. Sent again (its answer lost), it changes nothing a replay reads."""
        call = _call(request)
        if request.WhichOneof("outcome") is not None or request.HasField("retry_delay"):
            raise errors.invalid_argument(
                "attempt_started goes without an outcome and retry_delay: record the outcome of "
                "the attempt in a RecordStep of its own once it ends"
            )
        if request.attempt < 1:
            raise errors.invalid_argument("attempt must be 1 or more with attempt_started")
        return await self._journal.record(
            call,
            "STEP_ATTEMPT_STARTED",
            positioned=False,
            attempt=request.attempt,
            started_at=_started(request),
        )

    async def _record_step_task(self, request: jpb.RecordStepRequest) -> Appended:
        _require_step_lease(request)
        if request.attempt_started:
            raise errors.invalid_argument(
                "a step task's attempt is started by LoadStep: leave attempt_started unset"
            )
        event_type, fields, retry_in = _outcome(request)
        attempt = StepAttempt(
            workflow_id=request.workflow_id,
            step_id=request.step_id,
            fence=request.fence,
            attempt=max(request.attempt, 1),
            event_type=event_type,
            payload=fields.get("payload"),
            failure=fields.get("failure"),
            retry_in=retry_in,
            started_at=_started(request),
        )
        return await self._journal.record_step_attempt(attempt)

    @errors.unary
    async def ScheduleStep(
        self, request: jpb.ScheduleStepRequest, context: Context
    ) -> jpb.ScheduleStepResponse:
        call = _call(request)
        if not 0 < len(request.task_queue) <= MAX_TASK_QUEUE_LENGTH:
            raise errors.invalid_argument(
                f"task_queue must have 1 to {MAX_TASK_QUEUE_LENGTH} characters"
            )
        require_storable("task_queue", request.task_queue)
        namespaces.require_public("task_queue", request.task_queue)
        input_value = validate_payload("input", request.input)
        timeout = _limit(request, "timeout")
        step = RemoteStep(
            step_type=request.step_name,
            # The queue is named in the run's namespace, whose workers alone serve it.
            task_queue=namespaces.qualify(
                namespaces.namespace_of(request.workflow_id), request.task_queue
            ),
            input_value=input_value,
            retry=_retry_policy(request),
            timeout_seconds=timeout,
            heartbeat_timeout_seconds=_limit(request, "heartbeat_timeout"),
        )
        appended = await self._journal.schedule_step(call, step)
        return jpb.ScheduleStepResponse(
            event_id=appended.event_id, cancel_requested=appended.cancel_requested
        )

    @errors.unary
    async def LoadStep(
        self, request: jpb.LoadStepRequest, context: Context
    ) -> jpb.LoadStepResponse:
        _require_step_lease(request)
        await self._require_lease(request.workflow_id, request.step_id, request.fence)
        row = await self._journal.load_step(request.workflow_id, request.step_id, request.fence)
        response = jpb.LoadStepResponse(
            workflow_type=row["workflow_type"],
            step_type=row["step_type"],
            input=store.payload_in(row, "input"),
            attempt=row["attempt"],
            retry=_retry_message(row["retry"]),
            attempt_lost=row["attempt_lost"],
        )
        if row["timeout_seconds"] is not None:
            response.timeout.FromTimedelta(timedelta(seconds=row["timeout_seconds"]))
        if row["heartbeat_timeout_seconds"] is not None:
            seconds = row["heartbeat_timeout_seconds"]
            response.heartbeat_timeout.FromTimedelta(timedelta(seconds=seconds))
        if (details := store.payload_of(row, "heartbeat_details")) is not None:
            response.heartbeat_details.CopyFrom(details)
        return response

    @errors.unary
    async def StartTimer(
        self, request: jpb.StartTimerRequest, context: Context
    ) -> jpb.StartTimerResponse:
        call = _call(request)
        fire = request.WhichOneof("fire")
        if fire is None:
            raise errors.invalid_argument("one of delay or fire_time is required")
        if fire == "delay":
            appended = await self._journal.record(
                call, "TIMER_STARTED", due_in=seconds_of("delay", request.delay)
            )
        else:
            appended = await self._journal.record(
                call, "TIMER_STARTED", due_at=datetime_of("fire_time", request.fire_time)
            )
        return jpb.StartTimerResponse(
            fire_time=timestamp(appended.due_at), cancel_requested=appended.cancel_requested
        )

    @errors.unary
    async def ConsumeSignals(
        self, request: jpb.ConsumeSignalsRequest, context: Context
    ) -> jpb.ConsumeSignalsResponse:
        call = _call(request)
        if not request.signal_name:
            raise errors.invalid_argument("signal_name is required")
        require_storable("signal_name", request.signal_name)
        if request.timed_out:
            if request.event_ids:
                raise errors.invalid_argument("a timed-out wait consumes no signals")
            appended = await self._journal.record(
                call, "SIGNAL_TIMED_OUT", name=request.signal_name
            )
        else:
            appended = await self._journal.consume_signals(
                call,
                request.signal_name,
                list(request.event_ids),
                validate_payload("result", request.result),
            )
        return jpb.ConsumeSignalsResponse(cancel_requested=appended.cancel_requested)

    @errors.unary
    async def SetState(
        self, request: jpb.SetStateRequest, context: Context
    ) -> jpb.SetStateResponse:
        call = _call(request)
        if not request.key or len(request.key) > MAX_KEY_LENGTH:
            raise errors.invalid_argument(f"key must have 1 to {MAX_KEY_LENGTH} characters")
        require_storable("key", request.key)
        value = validate_payload("value", request.value)
        appended = await self._journal.record(
            call, "STATE_UPDATED", name=request.key, payload=value
        )
        return jpb.SetStateResponse(cancel_requested=appended.cancel_requested)

    @errors.unary
    async def RecordCancellation(
        self, request: jpb.RecordCancellationRequest, context: Context
    ) -> jpb.RecordCancellationResponse:
        await self._journal.record(_call(request), "CANCELLATION_DELIVERED")
        return jpb.RecordCancellationResponse()

    @errors.unary
    async def RecordHeartbeat(
        self, request: jpb.RecordHeartbeatRequest, context: Context
    ) -> jpb.RecordHeartbeatResponse:
        _require_step_lease(request)
        details = None
        if request.HasField("details"):
            details = validate_payload("details", request.details)
        cancel_requested = await self._journal.heartbeat(
            request.workflow_id,
            request.fence,
            request.step_id,
            max(request.attempt, 1),
            details,
            step_task=request.step_task,
        )
        return jpb.RecordHeartbeatResponse(cancel_requested=cancel_requested)

    @errors.unary
    async def SuspendWorkflow(
        self, request: jpb.SuspendWorkflowRequest, context: Context
    ) -> jpb.SuspendWorkflowResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        wait = request.wait
        if wait.kind == wf.WAIT_KIND_UNSPECIFIED or not wait.name:
            raise errors.invalid_argument("wait.kind and wait.name are required")
        if wait.kind not in wf.WaitKind.values():
            raise errors.invalid_argument(f"wait.kind {wait.kind} is not a known WaitKind")
        require_storable("wait.name", wait.name)
        if wait.kind in _TIMED_WAITS and not wait.HasField("until"):
            raise errors.invalid_argument("timers and retries need wait.until")
        until = datetime_of("wait.until", wait.until) if wait.HasField("until") else None
        await self._journal.suspend(
            request.workflow_id,
            request.fence,
            wf.WaitKind.Name(wait.kind).removeprefix("WAIT_KIND_"),
            wait.name,
            until,
        )
        return jpb.SuspendWorkflowResponse()

    @errors.unary
    async def FinishWorkflow(
        self, request: jpb.FinishWorkflowRequest, context: Context
    ) -> jpb.FinishWorkflowResponse:
        _require_workflow_id(request.workflow_id)
        _require_fence(request.fence)
        outcome = request.WhichOneof("outcome")
        if outcome is None:
            raise errors.invalid_argument("one of result, failure, park or cancelled is required")
        value = (
            validate_payload("result", request.result)
            if outcome == "result"
            else getattr(request, outcome)
        )
        status = await self._journal.finish(request.workflow_id, request.fence, outcome, value)
        return jpb.FinishWorkflowResponse(status=f"WORKFLOW_STATUS_{status}")

    async def Session(
        self, request_iterator: Any, context: Context
    ) -> AsyncIterator[jpb.SessionResponse]:
        """The calls above on one stream: each runs as its unary method, concurrently with
        the others; the answers ready together leave in one message."""
        answers: asyncio.Queue[jpb.JournalAnswer | None] = asyncio.Queue()
        calls: set[asyncio.Task[None]] = set()
        refused: list[errors.ApiError] = []  # a message that is not a SessionRequest
        cap = StreamCap(self._call_rate, "JournalService.Session")

        async def answer(call: jpb.JournalCall) -> None:
            answers.put_nowait(await self._answer(call, context))

        async def read() -> None:
            try:
                while (request := await context.read()) is not grpc.aio.EOF:
                    for call in request.calls:
                        cap.count()
                        task = asyncio.create_task(answer(call))
                        calls.add(task)
                        task.add_done_callback(calls.discard)
            except asyncio.CancelledError:
                pass  # closing: answer the calls taken, then end the stream
            except errors.ApiError as error:
                refused.append(error)  # answer the calls taken, then end with the error
            if calls:
                await asyncio.wait(set(calls))
            answers.put_nowait(None)

        reader = asyncio.create_task(read())
        self._session_readers.add(reader)
        reader.add_done_callback(self._session_readers.discard)
        try:
            finished = False
            while not finished:
                ready = [await answers.get()]
                while not answers.empty():
                    ready.append(answers.get_nowait())
                finished = ready[-1] is None  # the reader's last word
                for batch in _batches([answer for answer in ready if answer is not None]):
                    yield jpb.SessionResponse(answers=batch)
            if refused:
                await errors.abort_with(context, refused[0])
        finally:
            reader.cancel()
            for task in calls:
                task.cancel()

    async def _answer(self, call: jpb.JournalCall, context: Context) -> jpb.JournalAnswer:
        answer = jpb.JournalAnswer(id=call.id)
        field = call.WhichOneof("call")
        if field is None:
            error = errors.invalid_argument("a journal call needs one request, e.g. record_step")
            answer.error.CopyFrom(_session_error(error))
            return answer
        method, handler = _SESSION_CALLS[field]
        request = getattr(call, field)
        parent = context_from(call.trace_context)
        with multiplexed_call_span(JOURNAL_SERVICE, method, SpanKind.SERVER, parent) as span:
            try:
                getattr(answer, field).CopyFrom(await handler(self, request, context))
            except errors.ApiError as error:
                answer.error.CopyFrom(_session_error(error))
            except Exception as error:
                log.exception("journal call %s failed", method)
                unknown = errors.ApiError(grpc.StatusCode.UNKNOWN, "", f"{method} failed: {error}")
                answer.error.CopyFrom(_session_error(unknown))
            if answer.HasField("error"):
                span.set_status(Status(StatusCode.ERROR, answer.error.message))
        return answer


def _session_calls() -> dict[str, tuple[str, Any]]:
    """JournalCall's field -> the method it calls and that method's unary handler, without its
    status mapping (errors are answered on the stream): looked up once, not per call."""
    calls = {}
    for request in jpb.JournalCall.DESCRIPTOR.oneofs_by_name["call"].fields:
        if request.message_type is None:
            continue  # every field of the oneof is a request message
        method = request.message_type.name.removesuffix("Request")
        calls[request.name] = (method, inspect.unwrap(getattr(JournalServicer, method)))
    return calls


_SESSION_CALLS = _session_calls()


def _batches(answers: list[jpb.JournalAnswer]) -> Iterator[list[jpb.JournalAnswer]]:
    """The answers in messages that each fit the message limit. An answer too large for any
    message fails alone (one run's call never costs the stream, and so the worker's other
    runs, anything)."""
    batch: list[jpb.JournalAnswer] = []
    room = MAX_ITEM_BYTES
    for answer in answers:
        size = answer.ByteSize()
        if size > MAX_ITEM_BYTES:
            what = f"the answer to journal call {answer.id}"
            refused = jpb.JournalAnswer(id=answer.id)
            refused.error.CopyFrom(_session_error(limits.too_large(what, size, MAX_ITEM_BYTES)))
            answer, size = refused, refused.ByteSize()
        if batch and size > room:
            yield batch
            batch, room = [], MAX_ITEM_BYTES
        batch.append(answer)
        room -= size
    if batch:
        yield batch


def _session_error(error: errors.ApiError) -> jpb.SessionError:
    return jpb.SessionError(code=error.code.value[0], message=error.message, reason=error.reason)
