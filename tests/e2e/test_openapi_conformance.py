"""Schemathesis against /openapi.json: generated requests, valid and invalid, at every route of
a real cluster (the live feeds aside: they stream until their run ends). No answer may be a 5xx,
and every answer must match the document: its status, content type and schema."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks
from schemathesis.core.result import Ok

from tests.fixtures.cluster import Cluster
from tests.fixtures.postgres import Databases

EXAMPLES_PER_ROUTE = 25
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


@pytest.fixture(scope="module")
def api_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One cluster for every route's examples, with the research agent's worker, so that
    generated starts of "research_agent" succeed."""
    workdir: Path = tmp_path_factory.mktemp("openapi")
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, workdir, env_overrides={"PERDURE_RATE_LIMIT": "0"})
        try:
            cluster.start_services()
            cluster.start_worker("agent", module="examples.research_agent")
            yield cluster
        finally:
            cluster.stop()


def test_every_route_answers_as_its_document_says(api_cluster: Cluster) -> None:
    schema = schemathesis.openapi.from_url(f"http://{api_cluster.http_address}/openapi.json")
    operations = []
    routes = schema.exclude(operation_id="FollowWorkflow").exclude(operation_id="FollowStream")
    for result in routes.get_all_operations():
        assert isinstance(result, Ok), result.err()  # the document is valid
        operations.append(result.ok())
    assert len(operations) == 39
    answers: Counter[tuple[str, int]] = Counter()  # (generation mode, HTTP status)
    for operation, mode in itertools.product(operations, GenerationMode):
        examples(operation, mode, answers)()
    print(sorted(answers.items()))
    # Both kinds of request were made, and the valid ones did not all fail.
    assert {mode for mode, _ in answers} == {"positive", "negative"}
    assert answers["positive", 200] > 0


def examples(
    operation: schemathesis.APIOperation[Any, Any, Any, Any],
    mode: GenerationMode,
    answers: Counter[tuple[str, int]],
) -> Callable[[], None]:
    """A Hypothesis test of one route: its generated requests, each answer checked."""

    @given(case=operation.as_strategy(mode))
    @settings(
        max_examples=EXAMPLES_PER_ROUTE,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def answers_as_documented(case: schemathesis.Case[Any]) -> None:
        response = case.call_and_validate(checks=CHECKS)
        answers[mode.value, response.status_code] += 1

    return answers_as_documented
