"""A run's result, waited for (docs/http_api.md): the HTTP face of GetWorkflowResult, a long
poll that answers the moment the run closes."""

from __future__ import annotations

import math

from aiohttp import web
from google.protobuf.duration_pb2 import Duration

from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.gateway.http.convert import dumps, invalid_json, to_json
from perdure.gateway.http.routes import CALL_TIMEOUT_SECONDS, Handler, forwarded

PATH = "/v1/workflows/{workflow_id}/result"
QUERY = frozenset({"namespace", "run_id", "wait"})
# The most a protobuf Duration holds (about 10,000 years): beyond it no request can be made.
MAX_DURATION_SECONDS = 315_576_000_000


def wait_of(request: web.Request) -> Duration:
    """?wait=SECONDS (a number, or the JSON mapping's "30s"); none: answer at once. Its range
    (0 to 5 minutes) is the gRPC call's to check."""
    raw = request.query.get("wait", "0")
    try:
        seconds = float(raw.removesuffix("s"))
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and abs(seconds) <= MAX_DURATION_SECONDS):
        raise invalid_json(
            f"query parameter 'wait' must be a number of seconds (0 to 300), not {raw[:40]!r}"
        )
    wait = Duration()
    wait.FromNanoseconds(round(seconds * 1e9))
    return wait


def result_handler(stub: api_grpc.WorkflowServiceStub) -> Handler:
    """The handler of GET /v1/workflows/{workflow_id}/result."""

    async def result(request: web.Request) -> web.StreamResponse:
        unknown = sorted(set(request.query) - QUERY)
        if unknown:
            raise invalid_json(f"unknown query parameter {unknown[0]!r}")
        wait = wait_of(request)
        asked = api.GetWorkflowResultRequest(
            workflow_id=request.match_info["workflow_id"],
            namespace=request.query.get("namespace", ""),
            run_id=request.query.get("run_id", ""),
            wait=wait,
        )
        timeout = max(wait.ToTimedelta().total_seconds(), 0) + CALL_TIMEOUT_SECONDS
        answer = await stub.GetWorkflowResult(asked, metadata=forwarded(request), timeout=timeout)
        return web.json_response(to_json(answer), dumps=dumps)

    return result
