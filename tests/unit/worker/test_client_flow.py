"""Starting a run with flow settings from both clients: mapped to StartWorkflowRequest.flow,
and checked before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.client import AsyncClient, Budget, Client


class Gateway:
    """Keeps every StartWorkflow request; answers with its workflow id."""

    def __init__(self) -> None:
        self.requests: list[api.StartWorkflowRequest] = []

    def StartWorkflow(self, request: api.StartWorkflowRequest, timeout: float) -> Any:
        self.requests.append(request)
        return api.StartWorkflowResponse(workflow_id=request.workflow_id, run_id="r-1")


class AsyncGateway(Gateway):
    async def StartWorkflow(
        self,
        request: api.StartWorkflowRequest,
        timeout: float,  # noqa: ASYNC109 - as the stub's
    ) -> Any:
        return super().StartWorkflow(request, timeout)


FLOW: dict[str, Any] = {
    "keys": ["tenant:acme", "tier:gold"],
    "priority": 1,
    "fairness_key": "tenant:acme",
    "budget": Budget(units=2**62, cost_micros=5_000_000),
    "on_budget_exceeded": "fail",
}
EXPECTED = fpb.RunFlow(
    keys=["tenant:acme", "tier:gold"],
    priority=1,
    fairness_key="tenant:acme",
    budget=fpb.Budget(units=2**62, cost_micros=5_000_000),
    on_budget_exceeded=fpb.BUDGET_EXCEEDED_ACTION_FAIL,
)


def test_client_start_sends_the_runs_flow() -> None:
    client = Client()
    gateway = Gateway()
    client._stub = gateway  # type: ignore[assignment]
    handle = client.start("agent", {"q": 1}, workflow_id="wf-1", **FLOW)
    assert handle.workflow_id == "wf-1"
    [request] = gateway.requests
    assert request.flow == EXPECTED
    client.close()


async def test_async_client_start_sends_the_runs_flow() -> None:
    client = AsyncClient()
    gateway = AsyncGateway()
    client._stub = gateway  # type: ignore[assignment]
    await client.start("agent", None, **FLOW)
    await client.start_workflow(
        "agent", None, budget=Budget(cost_micros=1), on_budget_exceeded="wait"
    )
    first, second = gateway.requests
    assert first.flow == EXPECTED
    assert second.flow == fpb.RunFlow(
        budget=fpb.Budget(cost_micros=1), on_budget_exceeded=fpb.BUDGET_EXCEEDED_ACTION_WAIT
    )
    assert not second.flow.budget.HasField("units")  # no limit on units
    await client.close()


def test_a_start_without_flow_settings_sends_none() -> None:
    client = Client()
    gateway = Gateway()
    client._stub = gateway  # type: ignore[assignment]
    client.start_workflow("agent")
    assert not gateway.requests[0].HasField("flow")
    client.close()


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"priority": 0}, ValueError, r"priority must be 1 \(served first\) to 5"),
        ({"priority": 6}, ValueError, "priority must be 1"),
        ({"priority": "1"}, TypeError, "priority must be an int"),
        ({"keys": ["a"] * 2}, ValueError, "must not repeat"),
        ({"fairness_key": "x" * 201}, ValueError, "fairness_key must be at most 200"),
        ({"budget": {"units": 1}}, TypeError, "budget must be a Budget"),
        ({"on_budget_exceeded": "retry"}, ValueError, 'must be "wait" or "fail"'),
    ],
)
def test_bad_flow_settings_raise_before_anything_is_sent(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    client = Client()
    gateway = Gateway()
    client._stub = gateway  # type: ignore[assignment]
    with pytest.raises(error, match=words):
        client.start("agent", **options)
    assert gateway.requests == []
    client.close()


def test_a_budget_holds_whole_numbers_of_int64() -> None:
    with pytest.raises(ValueError, match=r"budget units must be >= 0 and < 2\*\*63"):
        Budget(units=2**63)
    with pytest.raises(TypeError, match="budget cost_micros must be an int"):
        Budget(cost_micros=0.5)  # type: ignore[arg-type]
