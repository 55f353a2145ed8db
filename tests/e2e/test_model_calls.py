"""Model calls as steps, through real processes: `ctx.model_call` is a remote step whose
worker asks an OpenAI-compatible client (the examples' offline model); the model, tokens and
cost it reported are journaled with the step, shown by describe, and settle the run's budget."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
import requests

from perdure.api.common.v1 import flow_pb2 as fpb
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Budget, Client
from perdure.worker import ModelPrices, usage_from_model_response
from perdure.worker._payload import to_payload
from tests.e2e.model_workflows import HUGE_COST_MICROS, HUGE_UNITS, MODEL, PRICES
from tests.fixtures.cluster import Cluster
from tests.fixtures.model_endpoint import ModelEndpoint
from tests.fixtures.otlp import OtlpReceiver
from tests.fixtures.runs import result_of

MODULE = "tests.e2e.model_workflows"
WAIT = 60.0
MAX = 2**63 - 1


def _cost(usage: dict[str, int], prices: ModelPrices) -> int:
    return usage_from_model_response(
        {"usage": usage},
        input_price_micros_per_million=prices.input_micros_per_million,
        output_price_micros_per_million=prices.output_micros_per_million,
    ).cost_micros


def test_the_usage_a_model_reported_is_journaled_with_its_step_and_settles_the_budget(
    client: Client,
) -> None:
    client.start_workflow(
        "ask_the_model",
        {"question": "What makes an agent durable?", "max_tokens": 30},
        workflow_id="model-usage-1",
        budget=Budget(units=100_000, cost_micros=10_000_000),
    )
    described = client.wait("model-usage-1", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described.workflow.failure
    result = result_of(described)
    reported = result["usages"]
    assert result["models"] == [MODEL] * 3
    assert all(text for text in result["texts"])
    # Every answer respected max_tokens, as the provider counts them.
    assert all(usage["completion_tokens"] <= 30 for usage in reported)

    events = list(client.history("model-usage-1"))
    outcomes = [e for e in events if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    assert [e.step_name for e in outcomes] == ["model_call"] * 3
    by_step = {e.step_id: e for e in outcomes}
    scheduled = [e.step_id for e in events if e.event_type == wf.EVENT_TYPE_STEP_SCHEDULED]
    # The journal holds, with each step, exactly what the model reported for it.
    for step_id, usage in zip(scheduled, reported, strict=True):
        journaled = by_step[step_id].usage
        assert journaled.model == MODEL
        assert journaled.usage.units == usage["total_tokens"]
        assert journaled.usage.cost_micros == _cost(usage, PRICES)

    steps = {s.step_id: s for s in described.steps}
    assert sorted(steps) == sorted(scheduled)
    for step_id, usage in zip(scheduled, reported, strict=True):
        assert steps[step_id].usage.model == MODEL
        assert steps[step_id].usage.usage.units == usage["total_tokens"]

    # The budget spent exactly what was reported: nothing is left reserved.
    flow = described.flow
    assert flow.reserved.units == 0 and flow.reserved.cost_micros == 0
    assert flow.spent.units == sum(u["total_tokens"] for u in reported)
    assert flow.spent.cost_micros == sum(_cost(u, PRICES) for u in reported)


def test_usage_past_two_to_the_53_is_journaled_and_served_exactly(
    shared: Cluster, client: Client
) -> None:
    """A report of 2**53 + 1 units and 2**63 - 1 micros reaches the journal, Describe and the
    HTTP API unrounded: the HTTP API spells int64 as strings."""
    client.start_workflow("huge_usage", workflow_id="model-usage-huge")
    described = client.wait("model-usage-huge", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described.workflow.failure
    (step,) = described.steps
    assert (step.usage.usage.units, step.usage.usage.cost_micros) == (HUGE_UNITS, HUGE_COST_MICROS)
    (outcome,) = [
        e
        for e in client.history("model-usage-huge")
        if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED
    ]
    assert (outcome.usage.usage.units, outcome.usage.usage.cost_micros) == (
        HUGE_UNITS,
        HUGE_COST_MICROS,
    )
    answer = requests.get(
        f"http://{shared.http_address}/v1/workflows/model-usage-huge", timeout=WAIT
    )
    assert answer.status_code == 200, answer.text
    (served,) = answer.json()["steps"]
    assert served["usage"]["usage"] == {
        "units": str(HUGE_UNITS),
        "cost_micros": str(HUGE_COST_MICROS),
    }


def test_sums_past_int64_show_as_its_largest_value_and_break_nothing(client: Client) -> None:
    """Reports each of the largest int64 add up past int64: a budget's spent over two steps, a
    retried step's usage over its attempts. The runs complete, and Describe shows those sums
    as 2**63 - 1, at least that much (the database keeps them exact), instead of failing."""
    limit = Budget(units=MAX, cost_micros=MAX)
    client.start_workflow("all_the_units", {}, workflow_id="model-usage-max", budget=limit)
    client.start_workflow("all_the_units", {"retried": True}, workflow_id="model-usage-max-2")
    budgeted = client.wait("model-usage-max", timeout=WAIT)
    assert budgeted.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, budgeted.workflow.failure
    assert [(s.usage.usage.units, s.usage.usage.cost_micros) for s in budgeted.steps] == [
        (MAX, MAX),
        (MAX, MAX),
    ]
    assert (budgeted.flow.spent.units, budgeted.flow.spent.cost_micros) == (MAX, MAX)
    assert (budgeted.flow.reserved.units, budgeted.flow.reserved.cost_micros) == (0, 0)

    retried = client.wait("model-usage-max-2", timeout=WAIT)
    assert retried.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, retried.workflow.failure
    (step,) = retried.steps
    assert step.attempts == 2
    assert (step.usage.usage.units, step.usage.usage.cost_micros) == (MAX, MAX)


def test_a_model_call_whose_estimate_does_not_fit_the_budget_is_refused_unrun(
    client: Client,
) -> None:
    # The estimate bounds the prompt's bytes plus max_tokens: far more than 50 units.
    client.start_workflow(
        "ask_the_model",
        {"question": "Will this fit?", "max_tokens": 30},
        workflow_id="model-usage-2",
        budget=Budget(units=50),
        on_budget_exceeded="fail",
    )
    described = client.wait("model-usage-2", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    assert "BudgetExceeded" in described.workflow.failure.type + described.workflow.failure.message
    events = list(client.history("model-usage-2"))
    assert not [e for e in events if e.event_type == wf.EVENT_TYPE_STEP_COMPLETED]
    assert described.flow.spent.units == 0


def test_usage_outside_a_step_task_is_refused_by_history(shared: Cluster) -> None:
    """A local step's outcome cannot carry usage: only a remote step's attempt reports one."""
    request = jpb.RecordStepRequest(
        workflow_id="model-usage-nobody",
        fence=1,
        step_id="s",
        step_name="s",
        attempt=1,
        output=to_payload(1),
        usage=fpb.StepUsage(usage=fpb.Usage(units=1)),
    )
    with grpc.insecure_channel(shared.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            journal.RecordStep(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "usage goes with step_task" in str(refused.value.details())


def test_model_calls_are_counted_by_model_in_the_metrics(
    otlp_receiver: OtlpReceiver, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp_receiver.grpc_endpoint, OTEL_METRIC_EXPORT_INTERVAL="300"
    )
    cluster.start_worker("w1", MODULE)
    with cluster.client() as client:
        client.start_workflow("ask_the_model", {"question": "Count me."}, workflow_id="counted")
        reported = result_of(client.wait("counted", timeout=WAIT))["usages"]
    tokens = sum(usage["total_tokens"] for usage in reported)
    cost = sum(_cost(usage, PRICES) for usage in reported)
    where = {"perdure.model": MODEL}
    counted = otlp_receiver.wait_for_metric(
        "perdure.model.tokens", lambda n: n >= tokens, WAIT, "the tokens", where=where
    )
    assert counted == tokens  # each report once, though three steps ran side by side
    assert (
        otlp_receiver.wait_for_metric(
            "perdure.model.cost", lambda n: n >= cost, WAIT, "the cost", where=where
        )
        == cost
    )


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_one_setting_points_the_model_calls_at_an_openai_compatible_endpoint(
    flavour: str, model_endpoint: ModelEndpoint, start_cluster: Callable[..., Cluster]
) -> None:
    """With PERDURE_MODEL_URL, the examples' client is the `openai` package's, over HTTP; the
    package's async client is awaited by model_step as well."""
    cluster = start_cluster()
    cluster.start_worker(
        "w1",
        MODULE,
        PERDURE_MODEL_URL=model_endpoint.url,
        OPENAI_API_KEY="k",
        MODEL_WORKFLOWS_ASYNC_CLIENT="1" if flavour == "async" else "",
    )
    with cluster.client() as client:
        client.start_workflow("ask_the_model", {"question": "Over HTTP?"}, workflow_id="http")
        described = client.wait("http", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED, described.workflow.failure
    result = result_of(described)
    # Three calls reached the endpoint, each with the journaled request.
    assert len(model_endpoint.requests) == 3
    assert {r["model"] for r in model_endpoint.requests} == {MODEL}
    assert all(r["max_tokens"] == 60 for r in model_endpoint.requests)
    assert all(text for text in result["texts"])
    steps = {s.step_id: s for s in described.steps}
    assert sum(s.usage.usage.units for s in steps.values()) == sum(
        u["total_tokens"] for u in result["usages"]
    )
