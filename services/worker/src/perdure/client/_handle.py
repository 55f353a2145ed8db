"""A handle on one workflow (and, when known, one run of it): what Client.start and
get_handle return, and the async twin AsyncClient returns. Each method is its client's method
for this workflow id."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client._requests import DEFAULT_STREAM
from perdure.client._stream import Frame

if TYPE_CHECKING:
    from perdure.client._async_client import AsyncClient
    from perdure.client._client import Client


class WorkflowHandle:
    """One workflow id (`run_id`: its run this handle was made for; "" follows the latest)."""

    def __init__(self, client: Client, workflow_id: str, run_id: str = "") -> None:
        self._client = client
        self.workflow_id = workflow_id
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"WorkflowHandle({self.workflow_id!r}, run_id={self.run_id!r})"

    def result(self, timeout: float | None = None) -> Any:
        """The value the workflow returned, exactly (ints stay ints); waits for it with long
        polls. Raises WorkflowFailedError (with its failure), WorkflowCancelledError,
        WorkflowTerminatedError, WorkflowParkedError, or WorkflowTimeoutError after
        `timeout` seconds (None: no limit)."""
        return self._client.result(self.workflow_id, run_id=self.run_id, timeout=timeout)

    def describe(self) -> api.DescribeWorkflowResponse:
        """The run's state and its recorded steps."""
        return self._client.describe(self.workflow_id, run_id=self.run_id)

    def signal(self, name: str, value: Any = None, signal_id: str | None = None) -> bool:
        """Send a signal; False when a signal with the same id was already received."""
        return self._client.signal(self.workflow_id, name, value, signal_id=signal_id or "")

    def query(self, key: str) -> Any:
        """The latest value the run published under `key` with ctx.set_state."""
        return self._client.query(self.workflow_id, key)

    def cancel(self, reason: str = "") -> None:
        """Ask the run to cancel (it may run compensating steps first)."""
        self._client.cancel(self.workflow_id, reason)

    def terminate(self, reason: str = "") -> None:
        """End the run at once, without running its code."""
        self._client.terminate(self.workflow_id, reason)

    def history(self) -> Iterator[wf.HistoryEvent]:
        """Every event of the run's journal, oldest first, page after page."""
        return self._client.history(self.workflow_id, run_id=self.run_id)

    def watch(self, after_event_id: int = 0) -> Iterator[api.WatchWorkflowResponse]:
        """The run's events (and summary) as they are committed, until it closes."""
        return self._client.watch(self.workflow_id, after_event_id, run_id=self.run_id)

    def stream(self, name: str = DEFAULT_STREAM, after_seq: int = 0) -> Iterator[Frame]:
        """The frames of stream `name`, live, each exactly once, until the run closes."""
        return self._client.stream(self.workflow_id, name, after_seq, run_id=self.run_id)


class AsyncWorkflowHandle:
    """WorkflowHandle's asyncio twin: the same methods, awaited (watch and stream: `async
    for`)."""

    def __init__(self, client: AsyncClient, workflow_id: str, run_id: str = "") -> None:
        self._client = client
        self.workflow_id = workflow_id
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"AsyncWorkflowHandle({self.workflow_id!r}, run_id={self.run_id!r})"

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 (as sync)
        """See WorkflowHandle.result."""
        return await self._client.result(self.workflow_id, run_id=self.run_id, timeout=timeout)

    async def describe(self) -> api.DescribeWorkflowResponse:
        return await self._client.describe(self.workflow_id, run_id=self.run_id)

    async def signal(self, name: str, value: Any = None, signal_id: str | None = None) -> bool:
        return await self._client.signal(self.workflow_id, name, value, signal_id=signal_id or "")

    async def query(self, key: str) -> Any:
        return await self._client.query(self.workflow_id, key)

    async def cancel(self, reason: str = "") -> None:
        await self._client.cancel(self.workflow_id, reason)

    async def terminate(self, reason: str = "") -> None:
        await self._client.terminate(self.workflow_id, reason)

    def history(self) -> AsyncIterator[wf.HistoryEvent]:
        return self._client.history(self.workflow_id, run_id=self.run_id)

    def watch(self, after_event_id: int = 0) -> AsyncIterator[api.WatchWorkflowResponse]:
        return self._client.watch(self.workflow_id, after_event_id, run_id=self.run_id)

    def stream(self, name: str = DEFAULT_STREAM, after_seq: int = 0) -> AsyncIterator[Frame]:
        return self._client.stream(self.workflow_id, name, after_seq, run_id=self.run_id)
