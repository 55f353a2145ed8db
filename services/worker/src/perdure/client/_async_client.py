"""An asyncio client of the gateway's WorkflowService: Client's surface, awaited."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import _requests as rq
from perdure.client._errors import UnavailableError, WorkflowTimeoutError, api_error
from perdure.client._handle import AsyncWorkflowHandle
from perdure.client._reconnect import Reconnect
from perdure.client._stream import Frame
from perdure.telemetry.rpc import aio_channel
from perdure.worker._flow import Budget, run_flow
from perdure.worker._payload import from_payload, to_payload
from perdure.worker._rpc import CHANNEL_OPTIONS


class AsyncClient:
    """Start workflows and read their state through the gateway, from asyncio code. Open it
    inside the event loop that uses it (`async with AsyncClient(...) as client:`)."""

    def __init__(
        self,
        address: str = "localhost:7400",
        *,
        timeout: float = 30.0,
        api_key: str | None = None,
        namespace: str = "",
    ) -> None:
        """`api_key` defaults to PERDURE_API_KEY; `namespace` to the key's (or "default")."""
        self._channel = aio_channel(
            address, CHANNEL_OPTIONS, api_key=api_key or os.environ.get("PERDURE_API_KEY")
        )
        self.namespace = namespace
        self._stub = apigrpc.WorkflowServiceStub(self._channel)
        self._timeout = timeout

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection."""
        await self._channel.close()

    async def _call(self, method: str, request: Any, seconds: float | None = None) -> Any:
        """A unary call (its deadline `seconds`, else the client's); a failure raises the
        typed RpcError of its reason."""
        try:
            return await getattr(self._stub, method)(request, timeout=seconds or self._timeout)
        except grpc.RpcError as error:
            raise api_error(error) from error

    async def start(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        workflow_id: str = "",
        task_queue: str = "",
        execution_timeout: float | None = None,
        id_reuse_policy: int = 0,
        request_id: str = "",
        keys: Sequence[str] | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        budget: Budget | None = None,
        on_budget_exceeded: str | None = None,
        debounce_key: str = "",
        debounce_window: float | None = None,
        singleton_key: str = "",
    ) -> AsyncWorkflowHandle:
        """Start a run (Client.start_workflow) and return a handle on it. Raises
        AlreadyStartedError when the workflow id is taken by a run started differently."""
        started = await self.start_workflow(
            workflow_type,
            input,
            workflow_id=workflow_id,
            task_queue=task_queue,
            execution_timeout=execution_timeout,
            id_reuse_policy=id_reuse_policy,
            request_id=request_id,
            keys=keys,
            priority=priority,
            fairness_key=fairness_key,
            budget=budget,
            on_budget_exceeded=on_budget_exceeded,
            debounce_key=debounce_key,
            debounce_window=debounce_window,
            singleton_key=singleton_key,
        )
        return AsyncWorkflowHandle(self, started.workflow_id, started.run_id)

    def get_handle(self, workflow_id: str, run_id: str | None = None) -> AsyncWorkflowHandle:
        """A handle on a workflow id (its run `run_id`; None: the latest run, followed)."""
        return AsyncWorkflowHandle(self, workflow_id, run_id or "")

    async def start_workflow(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        workflow_id: str = "",
        task_queue: str = "",
        execution_timeout: float | None = None,
        id_reuse_policy: int = 0,
        request_id: str = "",
        keys: Sequence[str] | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        budget: Budget | None = None,
        on_budget_exceeded: str | None = None,
        debounce_key: str = "",
        debounce_window: float | None = None,
        singleton_key: str = "",
    ) -> api.StartWorkflowResponse:
        """See Client.start_workflow."""
        request = rq.start_request(
            self.namespace,
            workflow_type,
            workflow_id,
            task_queue,
            input,
            execution_timeout,
            id_reuse_policy,
            request_id,
            flow=run_flow(keys, priority, fairness_key, budget, on_budget_exceeded),
            keys=rq.StartKeys(debounce_key, debounce_window, singleton_key),
        )
        response: api.StartWorkflowResponse = await self._call("StartWorkflow", request)
        return response

    async def signal(
        self, workflow_id: str, signal_name: str, payload: Any = None, *, signal_id: str = ""
    ) -> bool:
        """Send a signal; False when a signal with the same id was already received."""
        request = rq.signal_request(self.namespace, workflow_id, signal_name, payload, signal_id)
        response: api.SignalWorkflowResponse = await self._call("SignalWorkflow", request)
        return response.accepted

    async def signal_with_start(
        self,
        workflow_type: str,
        workflow_id: str,
        signal_name: str,
        payload: Any = None,
        *,
        input: Any = None,
        task_queue: str = "",
        signal_id: str = "",
        execution_timeout: float | None = None,
    ) -> api.SignalWithStartWorkflowResponse:
        """See Client.signal_with_start."""
        start = rq.start_request(
            self.namespace, workflow_type, workflow_id, task_queue, input, execution_timeout
        )
        response: api.SignalWithStartWorkflowResponse = await self._call(
            "SignalWithStartWorkflow",
            api.SignalWithStartWorkflowRequest(
                start=start,
                signal_name=signal_name,
                payload=to_payload(payload),
                signal_id=signal_id,
            ),
        )
        return response

    async def cancel(self, workflow_id: str, reason: str = "") -> None:
        """Ask the run to cancel (it may run compensating steps first)."""
        await self._call(
            "CancelWorkflow",
            api.CancelWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, reason=reason
            ),
        )

    async def terminate(self, workflow_id: str, reason: str = "") -> None:
        """End the run at once, without running its code."""
        await self._call(
            "TerminateWorkflow",
            api.TerminateWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, reason=reason
            ),
        )

    async def resume(self, workflow_id: str, reason: str = "", run_id: str = "") -> str:
        """See Client.resume: returns the run id."""
        response: api.ResumeWorkflowResponse = await self._call(
            "ResumeWorkflow",
            api.ResumeWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, run_id=run_id, reason=reason
            ),
        )
        return response.run_id

    async def reset(
        self,
        workflow_id: str,
        *,
        step_id: str = "",
        event_id: int = 0,
        reason: str = "",
        run_id: str = "",
    ) -> api.ResetWorkflowResponse:
        """See Client.reset."""
        response: api.ResetWorkflowResponse = await self._call(
            "ResetWorkflow",
            api.ResetWorkflowRequest(
                namespace=self.namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                step_id=step_id,
                event_id=event_id,
                reason=reason,
            ),
        )
        return response

    async def fork(
        self,
        workflow_id: str,
        new_workflow_id: str,
        *,
        step_id: str = "",
        overrides: Mapping[str, Any] | None = None,
        reason: str = "",
        run_id: str = "",
    ) -> api.ForkWorkflowResponse:
        """See Client.fork."""
        response: api.ForkWorkflowResponse = await self._call(
            "ForkWorkflow",
            api.ForkWorkflowRequest(
                namespace=self.namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                new_workflow_id=new_workflow_id,
                step_id=step_id,
                overrides=rq.fork_overrides(overrides),
                reason=reason,
            ),
        )
        return response

    async def query(self, workflow_id: str, key: str) -> Any:
        """The latest value the run published under `key` with ctx.set_state."""
        response: api.QueryWorkflowResponse = await self._call(
            "QueryWorkflow",
            api.QueryWorkflowRequest(namespace=self.namespace, workflow_id=workflow_id, key=key),
        )
        return from_payload(response.value)

    async def describe(self, workflow_id: str, run_id: str = "") -> api.DescribeWorkflowResponse:
        """The run's state and its recorded steps (Client.describe)."""
        response: api.DescribeWorkflowResponse = await self._call(
            "DescribeWorkflow",
            api.DescribeWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, run_id=run_id
            ),
        )
        return response

    async def history(
        self, workflow_id: str, page_size: int = 0, run_id: str = ""
    ) -> AsyncIterator[wf.HistoryEvent]:
        """Every event of the run's journal, oldest first, fetched page by page."""
        token = ""
        while True:
            page: api.GetWorkflowHistoryResponse = await self._call(
                "GetWorkflowHistory",
                api.GetWorkflowHistoryRequest(
                    namespace=self.namespace,
                    workflow_id=workflow_id,
                    page_size=page_size,
                    page_token=token,
                    run_id=run_id,
                ),
            )
            for event in page.events:
                yield event
            token = page.next_page_token
            if not token:
                return

    async def list(
        self,
        *,
        status: int = 0,
        workflow_type: str = "",
        page_size: int = 0,
        page_token: str = "",
        stuck: bool = False,
        parent_workflow_id: str = "",
    ) -> api.ListWorkflowsResponse:
        """One page of runs, newest first (Client.list)."""
        response: api.ListWorkflowsResponse = await self._call(
            "ListWorkflows",
            api.ListWorkflowsRequest(
                namespace=self.namespace,
                status=status,  # type: ignore[arg-type]
                workflow_type=workflow_type,
                page_size=page_size,
                page_token=page_token,
                stuck=stuck,
                parent_workflow_id=parent_workflow_id,
            ),
        )
        return response

    # `timeout` as in the sync client: a deadline of the wait, not an asyncio scope.
    async def result(
        self,
        workflow_id: str,
        *,
        run_id: str = "",
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Any:
        """The value the run returned (WorkflowHandle.result)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reconnect = Reconnect()
        while True:
            left = rq.LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            wait = min(rq.LONG_POLL_SECONDS, max(0.0, left))
            try:
                answer: api.GetWorkflowResultResponse = await self._call(
                    "GetWorkflowResult",
                    rq.result_request(self.namespace, workflow_id, run_id, wait),
                    seconds=wait + self._timeout,
                )
            except UnavailableError as error:  # a restarting gateway: wait on, within timeout
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(reconnect.delay(error))
                continue
            reconnect.progressed()
            if answer.closed and not rq.next_run(answer.workflow):
                return rq.outcome(answer.workflow)
            if answer.closed:
                run_id = rq.next_run(answer.workflow)
            elif deadline is not None and time.monotonic() >= deadline:
                raise WorkflowTimeoutError(
                    f"workflow {workflow_id!r} still running after {timeout}s"
                )

    async def watch(
        self, workflow_id: str, after_event_id: int = 0, *, run_id: str = ""
    ) -> AsyncIterator[api.WatchWorkflowResponse]:
        """See Client.watch."""
        reconnect = Reconnect()
        while True:
            request = rq.watch_request(self.namespace, workflow_id, run_id, after_event_id)
            call = self._stub.WatchWorkflow(request)
            try:
                async for message in call:
                    reconnect.progressed()
                    run_id = run_id or message.workflow.run_id
                    after_event_id = rq.new_events(message, after_event_id)
                    yield message
                    if message.closed:
                        return
                error = None
            except grpc.RpcError as broken:
                error = broken
            finally:
                call.cancel()  # a reader that stops early ends the call, not only its loop
            await asyncio.sleep(reconnect.delay(error))

    async def stream(
        self,
        workflow_id: str,
        name: str = rq.DEFAULT_STREAM,
        after_seq: int = 0,
        *,
        run_id: str = "",
    ) -> AsyncIterator[Frame]:
        """See Client.stream: `async for frame in client.stream(...)`."""
        run_id = run_id or (await self.describe(workflow_id)).workflow.run_id
        reconnect = Reconnect()
        while True:
            request = rq.read_stream_request(self.namespace, workflow_id, run_id, name, after_seq)
            call = self._stub.ReadStream(request)
            try:
                async for message in call:
                    reconnect.progressed()
                    for frame in message.frames:
                        if frame.seq > after_seq:
                            after_seq = frame.seq
                            yield Frame.of(frame)
                    if message.end:
                        return
                error = None
            except grpc.RpcError as broken:
                error = broken
            finally:
                call.cancel()  # a reader that stops early ends the call, not only its loop
            await asyncio.sleep(reconnect.delay(error))
