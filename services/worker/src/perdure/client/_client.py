"""A synchronous client of the gateway's WorkflowService."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import grpc

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as apigrpc
from perdure.client import _requests as rq
from perdure.client._errors import UnavailableError, WorkflowTimeoutError, api_error
from perdure.client._handle import WorkflowHandle
from perdure.client._reconnect import Reconnect
from perdure.client._stream import Frame
from perdure.telemetry.rpc import sync_channel
from perdure.worker._flow import Budget, run_flow
from perdure.worker._payload import from_payload, to_payload
from perdure.worker._rpc import CHANNEL_OPTIONS


class _RaisingRpcError:
    """A stub whose unary methods raise the typed RpcError where grpc raises its own."""

    def __init__(self, stub: apigrpc.WorkflowServiceStub) -> None:
        self._stub = stub

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except grpc.RpcError as error:
                raise api_error(error) from error

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
        self._raw = apigrpc.WorkflowServiceStub(self._channel)  # for streams, errors read there
        self._stub = cast(apigrpc.WorkflowServiceStub, _RaisingRpcError(self._raw))
        self._timeout = timeout

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._channel.close()

    def start(
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
    ) -> WorkflowHandle:
        """Start a run, as start_workflow, and return a handle on it. Raises
        AlreadyStartedError when the workflow id is taken by a run started differently."""
        started = self.start_workflow(
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
        return WorkflowHandle(self, started.workflow_id, started.run_id)

    def get_handle(self, workflow_id: str, run_id: str | None = None) -> WorkflowHandle:
        """A handle on a workflow id (its run `run_id`; None: the latest run, followed)."""
        return WorkflowHandle(self, workflow_id, run_id or "")

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
        keys: Sequence[str] | None = None,
        priority: int | None = None,
        fairness_key: str | None = None,
        budget: Budget | None = None,
        on_budget_exceeded: str | None = None,
        debounce_key: str = "",
        debounce_window: float | None = None,
        singleton_key: str = "",
    ) -> api.StartWorkflowResponse:
        """Start a run (idempotent by workflow id). Without `workflow_id`, a new one is fixed
        here, before the first send, so that a retried send starts nothing new; the answer
        carries it (and the run's `run_id`). With `execution_timeout` (seconds), the run fails
        with an ExecutionTimeout failure if it is still open that long after its start.
        `id_reuse_policy` (api.ID_REUSE_POLICY_*) says whether a workflow id whose last run
        is closed starts a new run; `request_id` names this start (one is fixed here when
        empty): the same request id returns the run it made, so a retry never makes two.

        Flow control (docs/worker-protocol.md §27): `keys` (at most 8, e.g. "tenant:acme")
        put the run's tasks under the limits set on them and its steps' estimates under their
        budgets; `priority` 1 (served first) to 5 (default 3); `fairness_key` shares grants
        fairly across its values; `budget` (a Budget of units and cost_micros) bounds the run's
        whole life; `on_budget_exceeded` "wait" (the default: a step waits for room) or
        "fail" (the step fails with BudgetExceeded). Bad values raise ValueError or TypeError
        before anything is sent.

        `debounce_key` with `debounce_window` (seconds) joins the key's pending run instead
        (it takes this input and waits the window again: `debounced` in the answer);
        `singleton_key` returns the key's open run if there is one (`singleton`)."""
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
        response: api.StartWorkflowResponse = self._stub.StartWorkflow(
            request, timeout=self._timeout
        )
        return response

    def signal(
        self, workflow_id: str, signal_name: str, payload: Any = None, *, signal_id: str = ""
    ) -> bool:
        """Send a signal; False when a signal with the same id was already received."""
        response: api.SignalWorkflowResponse = self._stub.SignalWorkflow(
            rq.signal_request(self.namespace, workflow_id, signal_name, payload, signal_id),
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
        start = rq.start_request(
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
                overrides=rq.fork_overrides(overrides),
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
        parent_workflow_id: str = "",
    ) -> api.ListWorkflowsResponse:
        """One page of runs, newest first (`stuck`: only runs found stuck, see
        WorkflowInfo.stuck_time; `parent_workflow_id`: only the children of that workflow)."""
        response: api.ListWorkflowsResponse = self._stub.ListWorkflows(
            api.ListWorkflowsRequest(
                namespace=self.namespace,
                status=status,  # type: ignore[arg-type]
                workflow_type=workflow_type,
                page_size=page_size,
                page_token=page_token,
                stuck=stuck,
                parent_workflow_id=parent_workflow_id,
            ),
            timeout=self._timeout,
        )
        return response

    def wait(self, workflow_id: str, timeout: float = 60.0) -> api.DescribeWorkflowResponse:
        """Wait until the workflow id's run (followed through continue-as-new) is closed, and
        describe it; raise WorkflowTimeoutError (a TimeoutError) after `timeout` seconds."""
        self._closed(workflow_id, "", timeout)
        return self.describe(workflow_id)

    def result(self, workflow_id: str, *, run_id: str = "", timeout: float | None = None) -> Any:
        """The value the run returned (WorkflowHandle.result)."""
        return rq.outcome(self._closed(workflow_id, run_id, timeout))

    def _closed(self, workflow_id: str, run_id: str, timeout: float | None) -> wf.WorkflowInfo:
        """The closed run's summary, waited for with GetWorkflowResult long polls (each at
        most LONG_POLL_SECONDS), a continued run followed to its next."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reconnect = Reconnect()
        while True:
            left = rq.LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            wait = min(rq.LONG_POLL_SECONDS, max(0.0, left))
            try:
                answer: api.GetWorkflowResultResponse = self._stub.GetWorkflowResult(
                    rq.result_request(self.namespace, workflow_id, run_id, wait),
                    timeout=wait + self._timeout,
                )
            except UnavailableError as error:  # a restarting gateway: wait on, within timeout
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                time.sleep(reconnect.delay(error))
                continue
            reconnect.progressed()
            if answer.closed and not rq.next_run(answer.workflow):
                return answer.workflow
            if answer.closed:
                run_id = rq.next_run(answer.workflow)
            elif deadline is not None and time.monotonic() >= deadline:
                raise WorkflowTimeoutError(
                    f"workflow {workflow_id!r} still running after {timeout}s"
                )

    def watch(
        self, workflow_id: str, after_event_id: int = 0, *, run_id: str = ""
    ) -> Iterator[api.WatchWorkflowResponse]:
        """The run's events as they are committed (WatchWorkflow), the run's summary when its
        status changes, until a last message with `closed`; reconnects from the last event id
        seen when the call breaks, so each event comes once."""
        reconnect = Reconnect()
        while True:
            request = rq.watch_request(self.namespace, workflow_id, run_id, after_event_id)
            call = self._raw.WatchWorkflow(request)
            try:
                for message in call:
                    reconnect.progressed()
                    run_id = run_id or message.workflow.run_id  # the same run after a break
                    after_event_id = rq.new_events(message, after_event_id)
                    yield message
                    if message.closed:
                        return
                error = None
            except grpc.RpcError as broken:
                error = broken
            finally:
                call.cancel()  # a reader that stops early ends the call, not only its loop
            time.sleep(reconnect.delay(error))

    def stream(
        self,
        workflow_id: str,
        name: str = rq.DEFAULT_STREAM,
        after_seq: int = 0,
        *,
        run_id: str = "",
    ) -> Iterator[Frame]:
        """The frames of the run's stream `name` after `after_seq`, as they are stored, until
        the run is closed and all are read (ReadStream, follow); reconnects from the last seq
        seen when the call breaks, so each frame comes exactly once."""
        run_id = run_id or self.describe(workflow_id).workflow.run_id  # one run, across breaks
        reconnect = Reconnect()
        while True:
            request = rq.read_stream_request(self.namespace, workflow_id, run_id, name, after_seq)
            call = self._raw.ReadStream(request)
            try:
                for message in call:
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
            time.sleep(reconnect.delay(error))
