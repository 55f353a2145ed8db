"""The public workflow API as history serves it (the gateway validated the request first):
start, signal, cancel, terminate, describe, query, history and list; resume, reset and fork.
Public names arrive with their namespace and leave without it; inside, runs go by qualified
ids."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import auth, errors, namespaces
from perdure.common.convert import timestamp
from perdure.common.payload import normalized
from perdure.history.chains import IdReusePolicy
from perdure.history.flow import run_flow_bytes, run_flow_status
from perdure.history.journal import Journal
from perdure.history.model import RunStatus
from perdure.history.rows import payload_in
from perdure.history.validation import acting_key, execution_timeout, run_key, start_keys
from perdure.internal.history.v1 import history_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]


def public(info: wf.WorkflowInfo) -> wf.WorkflowInfo:
    """A run's summary as its namespace's callers know it."""
    info.workflow_id = namespaces.split(info.workflow_id)[1]
    return info


class WorkflowApi:
    """HistoryService's calls of the public workflow API."""

    _journal: Journal

    @errors.unary
    async def StartWorkflow(
        self, request: hpb.StartWorkflowRequest, context: Context
    ) -> hpb.StartWorkflowResponse:
        r = request.request
        namespace = namespaces.resolve(r.namespace)
        keys = start_keys(r)
        if keys.keyed:
            keyed = await self._journal.start_keyed(
                run_key(r),
                r.workflow_type,
                namespaces.qualify(namespace, r.task_queue),
                normalized(r.input),
                keys,
                execution_timeout(r),
                r.request_id or None,
            )
            if keyed is not None:
                return hpb.StartWorkflowResponse(
                    response=api.StartWorkflowResponse(
                        workflow_id=keyed.workflow_id,
                        started=keyed.started,
                        status=keyed.status.proto,
                        run_id=keyed.run_id,
                        debounced=keyed.debounced,
                        singleton=keyed.singleton,
                    )
                )
        started, status, run_id = await self._journal.start(
            run_key(r),
            r.workflow_type,
            namespaces.qualify(namespace, r.task_queue),
            normalized(r.input),
            execution_timeout(r),
            IdReusePolicy(r.id_reuse_policy),
            r.request_id or None,
            run_flow_bytes(r.flow if r.HasField("flow") else None),
        )
        return hpb.StartWorkflowResponse(
            response=api.StartWorkflowResponse(
                workflow_id=r.workflow_id, started=started, status=status.proto, run_id=run_id
            )
        )

    @errors.unary
    async def DescribeWorkflow(
        self, request: hpb.DescribeWorkflowRequest, context: Context
    ) -> hpb.DescribeWorkflowResponse:
        r = request.request
        run = await self._journal.run_of(run_key(r), r.run_id)
        described = await self._journal.describe(run)
        approvals = await self._journal.pending_approvals(run)
        return hpb.DescribeWorkflowResponse(
            response=api.DescribeWorkflowResponse(
                workflow=public(described.info),
                steps=described.steps,
                current_step=described.current_step,
                pending_signals=described.pending_signals,
                state=described.state,
                flow=run_flow_status(described.flow),
                children=described.children,
                pending_approvals=approvals,
            )
        )

    @errors.unary
    async def GetWorkflowHistory(
        self, request: hpb.GetWorkflowHistoryRequest, context: Context
    ) -> hpb.GetWorkflowHistoryResponse:
        r = request.request
        events, token = await self._journal.history_page(
            await self._journal.run_of(run_key(r), r.run_id),
            r.page_size,
            r.page_token,
            r.after_event_id,
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
            RunStatus(wf.WorkflowStatus.Name(r.status).removeprefix("WORKFLOW_STATUS_"))
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
            parent_workflow_id=(
                namespaces.qualify(namespace, r.parent_workflow_id)
                if r.parent_workflow_id
                else None
            ),
        )
        return hpb.ListWorkflowsResponse(
            response=api.ListWorkflowsResponse(
                workflows=[public(run) for run in runs], next_page_token=token
            )
        )

    @errors.unary
    async def SignalWorkflow(
        self, request: hpb.SignalWorkflowRequest, context: Context
    ) -> hpb.SignalWorkflowResponse:
        r = request.request
        accepted = await self._journal.signal(
            run_key(r), r.signal_name, normalized(r.payload), r.signal_id or None
        )
        return hpb.SignalWorkflowResponse(response=api.SignalWorkflowResponse(accepted=accepted))

    @errors.unary
    async def SignalWithStartWorkflow(
        self, request: hpb.SignalWithStartWorkflowRequest, context: Context
    ) -> hpb.SignalWithStartWorkflowResponse:
        r = request.request
        started, accepted = await self._journal.signal_with_start(
            run_key(r.start),
            r.start.workflow_type,
            namespaces.qualify(auth.acting_namespace(r.start.namespace), r.start.task_queue),
            normalized(r.start.input),
            r.signal_name,
            normalized(r.payload),
            r.signal_id or None,
            execution_timeout(r.start),
            run_flow_bytes(r.start.flow if r.start.HasField("flow") else None),
        )
        return hpb.SignalWithStartWorkflowResponse(
            response=api.SignalWithStartWorkflowResponse(started=started, accepted=accepted)
        )

    @errors.unary
    async def CancelWorkflow(
        self, request: hpb.CancelWorkflowRequest, context: Context
    ) -> hpb.CancelWorkflowResponse:
        r = request.request
        await self._journal.cancel(run_key(r), r.reason, acting_key())
        return hpb.CancelWorkflowResponse(response=api.CancelWorkflowResponse())

    @errors.unary
    async def TerminateWorkflow(
        self, request: hpb.TerminateWorkflowRequest, context: Context
    ) -> hpb.TerminateWorkflowResponse:
        r = request.request
        await self._journal.terminate(run_key(r), r.reason, acting_key())
        return hpb.TerminateWorkflowResponse(response=api.TerminateWorkflowResponse())

    @errors.unary
    async def ResumeWorkflow(
        self, request: hpb.ResumeWorkflowRequest, context: Context
    ) -> hpb.ResumeWorkflowResponse:
        r = request.request
        run_id = await self._journal.resume(run_key(r), r.run_id, r.reason, acting_key())
        return hpb.ResumeWorkflowResponse(response=api.ResumeWorkflowResponse(run_id=run_id))

    @errors.unary
    async def ResetWorkflow(
        self, request: hpb.ResetWorkflowRequest, context: Context
    ) -> hpb.ResetWorkflowResponse:
        r = request.request
        copied = await self._journal.reset(
            run_key(r), r.run_id, r.step_id, r.event_id, r.reason, acting_key()
        )
        return hpb.ResetWorkflowResponse(
            response=api.ResetWorkflowResponse(
                run_id=copied.run_id, copied_up_to_event_id=copied.copied_up_to_event_id
            )
        )

    @errors.unary
    async def ForkWorkflow(
        self, request: hpb.ForkWorkflowRequest, context: Context
    ) -> hpb.ForkWorkflowResponse:
        r = request.request
        source = run_key(r)
        copied = await self._journal.fork(
            source,
            r.run_id,
            namespaces.qualify(namespaces.namespace_of(source), r.new_workflow_id),
            r.step_id,
            {step: normalized(value) for step, value in r.overrides.items()},
            r.reason,
            acting_key(),
        )
        return hpb.ForkWorkflowResponse(
            response=api.ForkWorkflowResponse(
                workflow_id=r.new_workflow_id,
                run_id=copied.run_id,
                copied_up_to_event_id=copied.copied_up_to_event_id,
            )
        )

    @errors.unary
    async def QueryWorkflow(
        self, request: hpb.QueryWorkflowRequest, context: Context
    ) -> hpb.QueryWorkflowResponse:
        row = await self._journal.query(run_key(request.request), request.request.key)
        return hpb.QueryWorkflowResponse(
            response=api.QueryWorkflowResponse(
                value=payload_in(row, "payload"), update_time=timestamp(row["created_at"])
            )
        )
