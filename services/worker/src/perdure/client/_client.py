"""A synchronous client of the gateway's WorkflowService."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any, cast

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.telemetry.rpc import sync_channel
from perdure.worker._errors import PerdureError
from perdure.worker._payload import from_payload, to_payload
from perdure.worker._rpc import CHANNEL_OPTIONS

CLOSED = frozenset(
    {
        wf.WORKFLOW_STATUS_COMPLETED,
        wf.WORKFLOW_STATUS_FAILED,
        wf.WORKFLOW_STATUS_PARKED,
        wf.WORKFLOW_STATUS_CANCELLED,
        wf.WORKFLOW_STATUS_TERMINATED,
    }
)


class WaitTimeoutError(PerdureError, TimeoutError):
    """`Client.wait` gave up: the run was still open after its timeout."""


class RpcError(PerdureError, grpc.RpcError):
    """A call to the API failed. Also a grpc.RpcError, with the call's code(), details() and
    trailing_metadata() (which carries the google.rpc.Status details)."""

    def __init__(self, cause: grpc.RpcError) -> None:
        super().__init__(f"{cause.code().name}: {cause.details()}")
        self.cause = cause

    def code(self) -> grpc.StatusCode:
        return self.cause.code()

    def details(self) -> str | None:
        return self.cause.details()

    def trailing_metadata(self) -> Any:
        return self.cause.trailing_metadata()


class _RaisingRpcError:
    """A stub whose methods raise RpcError where grpc raises its own."""

    def __init__(self, stub: apigrpc.WorkflowServiceStub) -> None:
        self._stub = stub

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except grpc.RpcError as error:
                raise RpcError(error) from error

        return call


class Client:
    """Start workflows and read their state through the gateway."""

    def __init__(
        self,
        address: str = "localhost:7400",
        *,
        timeout: float = 30.0,
        api_key: str | None = None,
        namespace: str = "",
    ) -> None:
        """`api_key` defaults to PERDURE_API_KEY; `namespace` to the key's (or "default")."""
        # Carries the caller's trace context when the program traces (an SDK tracer provider
        # is installed): a workflow started inside a request's span joins that trace.
        self._channel = sync_channel(
            address, CHANNEL_OPTIONS, api_key=api_key or os.environ.get("PERDURE_API_KEY")
        )
        self.namespace = namespace
        stub = apigrpc.WorkflowServiceStub(self._channel)
        self._stub = cast(apigrpc.WorkflowServiceStub, _RaisingRpcError(stub))
        self._timeout = timeout

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._channel.close()

    def start_workflow(
        self,
        workflow_type: str,
        input: Any = None,
        *,
        workflow_id: str = "",
        task_queue: str = "",
        execution_timeout: float | None = None,
        id_reuse_policy: int = 0,
        request_id: str = "",
    ) -> api.StartWorkflowResponse:
        """Start a run (idempotent by workflow id). Without `workflow_id`, a new one is fixed
        here, before the first send, so that a retried send starts nothing new; the answer
        carries it (and the run's `run_id`). With `execution_timeout` (seconds), the run fails
        with an ExecutionTimeout failure if it is still open that long after its start.
        `id_reuse_policy` (api.ID_REUSE_POLICY_*) says whether a workflow id whose last run
        is closed starts a new run; `request_id` names this start (one is fixed here when
        empty): the same request id returns the run it made, so a retry never makes two."""
        request = _start_request(
            self.namespace,
            workflow_type,
            workflow_id or str(uuid.uuid4()),
            task_queue,
            input,
            execution_timeout,
        )
        request.id_reuse_policy = id_reuse_policy  # type: ignore[assignment]
        request.request_id = request_id or str(uuid.uuid4())
        response: api.StartWorkflowResponse = self._stub.StartWorkflow(
            request, timeout=self._timeout
        )
        return response

    def signal(
        self, workflow_id: str, signal_name: str, payload: Any = None, *, signal_id: str = ""
    ) -> bool:
        """Send a signal; False when a signal with the same id was already received."""
        response: api.SignalWorkflowResponse = self._stub.SignalWorkflow(
            api.SignalWorkflowRequest(
                namespace=self.namespace,
                workflow_id=workflow_id,
                signal_name=signal_name,
                payload=to_payload(payload),
                signal_id=signal_id,
            ),
            timeout=self._timeout,
        )
        return response.accepted

    def signal_with_start(
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
        """Signal the run, starting it with `input` (and `execution_timeout`, as
        start_workflow) first if no run has the id."""
        start = _start_request(
            self.namespace, workflow_type, workflow_id, task_queue, input, execution_timeout
        )
        response: api.SignalWithStartWorkflowResponse = self._stub.SignalWithStartWorkflow(
            api.SignalWithStartWorkflowRequest(
                start=start,
                signal_name=signal_name,
                payload=to_payload(payload),
                signal_id=signal_id,
            ),
            timeout=self._timeout,
        )
        return response

    def cancel(self, workflow_id: str, reason: str = "") -> None:
        """Ask the run to cancel (it may run compensating steps first)."""
        self._stub.CancelWorkflow(
            api.CancelWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, reason=reason
            ),
            timeout=self._timeout,
        )

    def terminate(self, workflow_id: str, reason: str = "") -> None:
        """End the run at once, without running its code."""
        self._stub.TerminateWorkflow(
            api.TerminateWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, reason=reason
            ),
            timeout=self._timeout,
        )

    def resume(self, workflow_id: str, reason: str = "", run_id: str = "") -> str:
        """Open the parked run again (deploy the fixed code first): a worker replays it from
        the start. Returns its run id."""
        response: api.ResumeWorkflowResponse = self._stub.ResumeWorkflow(
            api.ResumeWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, run_id=run_id, reason=reason
            ),
            timeout=self._timeout,
        )
        return response.run_id

    def reset(
        self,
        workflow_id: str,
        *,
        step_id: str = "",
        event_id: int = 0,
        reason: str = "",
        run_id: str = "",
    ) -> api.ResetWorkflowResponse:
        """Start the workflow id's next run from a copy of its run `run_id` (default: the
        latest) before step `step_id` (or event `event_id`): that step and all after it run
        again, the steps before it are not."""
        response: api.ResetWorkflowResponse = self._stub.ResetWorkflow(
            api.ResetWorkflowRequest(
                namespace=self.namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                step_id=step_id,
                event_id=event_id,
                reason=reason,
            ),
            timeout=self._timeout,
        )
        return response

    def fork(
        self,
        workflow_id: str,
        new_workflow_id: str,
        *,
        step_id: str = "",
        overrides: Mapping[str, Any] | None = None,
        reason: str = "",
        run_id: str = "",
    ) -> api.ForkWorkflowResponse:
        """Start a run `new_workflow_id` from a copy of the run's journal before step
        `step_id` (default: all of it), the recorded outputs of the steps `overrides` names
        replaced by its values. The source is not changed."""
        response: api.ForkWorkflowResponse = self._stub.ForkWorkflow(
            api.ForkWorkflowRequest(
                namespace=self.namespace,
                workflow_id=workflow_id,
                run_id=run_id,
                new_workflow_id=new_workflow_id,
                step_id=step_id,
                overrides={step: to_payload(value) for step, value in (overrides or {}).items()},
                reason=reason,
            ),
            timeout=self._timeout,
        )
        return response

    def query(self, workflow_id: str, key: str) -> Any:
        """The latest value the run published under `key` with ctx.set_state."""
        response: api.QueryWorkflowResponse = self._stub.QueryWorkflow(
            api.QueryWorkflowRequest(namespace=self.namespace, workflow_id=workflow_id, key=key),
            timeout=self._timeout,
        )
        return from_payload(response.value)

    def describe(self, workflow_id: str, run_id: str = "") -> api.DescribeWorkflowResponse:
        """The run's state and its recorded steps: the workflow id's latest run, or its run
        `run_id` (WorkflowInfo.run_id, previous_run_id, next_run_id)."""
        response: api.DescribeWorkflowResponse = self._stub.DescribeWorkflow(
            api.DescribeWorkflowRequest(
                namespace=self.namespace, workflow_id=workflow_id, run_id=run_id
            ),
            timeout=self._timeout,
        )
        return response

    def history(
        self, workflow_id: str, page_size: int = 0, run_id: str = ""
    ) -> Iterator[wf.HistoryEvent]:
        """Every event of the run's journal (the latest run's, or run `run_id`'s), oldest
        first, fetched page by page."""
        token = ""
        while True:
            page: api.GetWorkflowHistoryResponse = self._stub.GetWorkflowHistory(
                api.GetWorkflowHistoryRequest(
                    namespace=self.namespace,
                    workflow_id=workflow_id,
                    page_size=page_size,
                    page_token=token,
                    run_id=run_id,
                ),
                timeout=self._timeout,
            )
            yield from page.events
            token = page.next_page_token
            if not token:
                return

    def list(
        self,
        *,
        status: int = 0,
        workflow_type: str = "",
        page_size: int = 0,
        page_token: str = "",
        stuck: bool = False,
    ) -> api.ListWorkflowsResponse:
        """One page of runs, newest first (`stuck`: only runs found stuck, see
        WorkflowInfo.stuck_time)."""
        response: api.ListWorkflowsResponse = self._stub.ListWorkflows(
            api.ListWorkflowsRequest(
                namespace=self.namespace,
                status=status,  # type: ignore[arg-type]
                workflow_type=workflow_type,
                page_size=page_size,
                page_token=page_token,
                stuck=stuck,
            ),
            timeout=self._timeout,
        )
        return response

    def wait(self, workflow_id: str, timeout: float = 60.0) -> api.DescribeWorkflowResponse:
        """Poll until the run is closed; raise WaitTimeoutError (a TimeoutError) after `timeout`
        seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            described = self.describe(workflow_id)
            if described.workflow.status in CLOSED:
                return described
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f"workflow {workflow_id!r} still running after {timeout}s")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)


def _start_request(
    namespace: str,
    workflow_type: str,
    workflow_id: str,
    task_queue: str,
    input: Any,
    execution_timeout: float | None,
) -> api.StartWorkflowRequest:
    request = api.StartWorkflowRequest(
        namespace=namespace,
        workflow_type=workflow_type,
        workflow_id=workflow_id,
        task_queue=task_queue,
        input=to_payload(input),
    )
    if execution_timeout is not None:
        request.execution_timeout.FromTimedelta(timedelta(seconds=execution_timeout))
    return request
