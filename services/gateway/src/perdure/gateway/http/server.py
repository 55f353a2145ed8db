"""The gateway's HTTP server: the JSON routes, the live feeds and the result long poll,
/openapi.json and the web UI."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor

from perdure.api.admin.v1 import admin_service_pb2_grpc as admin_grpc
from perdure.api.workflow.v1 import approval_service_pb2_grpc as approvals_grpc
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as schedules_grpc
from perdure.api.workflow.v1 import workflow_service_pb2_grpc as api_grpc
from perdure.common.errors import ApiError
from perdure.common.reasons import Reason
from perdure.common.service_identity import service_channel
from perdure.common.tls import HttpsContext, gateway_requires_client_cert, https_context
from perdure.gateway.http import feed, openapi, result, stream_feed
from perdure.gateway.http.admission import defer_continue
from perdure.gateway.http.convert import HttpError, error_body, rpc_error_body
from perdure.gateway.http.headers import security_headers
from perdure.gateway.http.routes import ROUTES, Handler, Route, route_handler
from perdure.gateway.http.sse import open_feeds

log = logging.getLogger(__name__)

UI = Path(__file__).resolve().parent.parent / "ui"
# Open feeds are cut this long after the server starts to stop.
SHUTDOWN_SECONDS = 2.0
# How often the certificate files are looked at, to serve rotated ones without a restart.
CERT_CHECK_SECONDS = 2.0
# An HTTP status the routes do not produce themselves, as the gRPC code it stands for.
_CODE_OF_STATUS = {
    404: grpc.StatusCode.NOT_FOUND,
    405: grpc.StatusCode.UNIMPLEMENTED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as the JSON error body, with the HTTP status of its gRPC code."""
    try:
        return await handler(request)
    except ApiError as error:
        status = error.status if isinstance(error, HttpError) else None
        body = error_body(error.code, error.reason, error.message, status)
    except grpc.aio.AioRpcError as error:
        body = rpc_error_body(error)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        code = _CODE_OF_STATUS.get(error.status, grpc.StatusCode.INVALID_ARGUMENT)
        body = error_body(code, error.reason.upper().replace(" ", "_"), error.text or "")
        body["error"]["status"] = error.status
        return web.json_response(body, status=error.status, headers=_allow(error))
    except Exception:
        # A fault of the gateway's own: logged here, never described to the caller.
        log.exception("HTTP %s %s failed", request.method, request.path)
        body = error_body(
            grpc.StatusCode.INTERNAL, Reason.INTERNAL, "the gateway failed to answer; see its log"
        )
    return web.json_response(body, status=body["error"]["status"])


def _allow(error: web.HTTPException) -> dict[str, str]:
    allow = error.headers.get("Allow")
    return {"Allow": allow} if allow else {}


def instrument_http() -> None:
    """A span per HTTP request, parent of the gRPC call it makes (applications made from now
    on); for when tracing is on."""
    AioHttpServerInstrumentor().instrument()


def build_app(
    stub: api_grpc.WorkflowServiceStub,
    admin: admin_grpc.AdminServiceStub,
    schedules: schedules_grpc.ScheduleServiceStub,
    approvals: approvals_grpc.ApprovalServiceStub,
    https: bool = False,
) -> web.Application:
    """The application: routes, feed, document and UI, every answer with the security
    headers (HSTS too when served over `https`)."""
    app = web.Application(middlewares=[json_errors])
    app.on_response_prepare.append(security_headers(https))
    for route in ROUTES:
        # (bodies are read only once their caller's key is checked: no early 100 Continue)
        expect = defer_continue if route.method == "POST" else None
        app.router.add_route(
            route.method,
            route.path,
            route_handler(route, _stub_of(route, stub, admin, schedules, approvals)),
            expect_handler=expect,
        )
    feeds = open_feeds()  # a caller's open feeds of every kind
    app.router.add_get(feed.PATH, feed.feed_handler(stub, feeds))
    app.router.add_get(stream_feed.PATH, stream_feed.stream_feed_handler(stub, feeds))
    app.router.add_get(result.PATH, result.result_handler(stub))
    document = openapi.document(_version())

    async def openapi_json(request: web.Request) -> web.StreamResponse:
        return web.json_response(document)

    async def index(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(UI / "index.html", headers={"Cache-Control": "no-cache"})

    app.router.add_get("/openapi.json", openapi_json)
    app.router.add_get("/", index)
    app.router.add_static("/ui/", UI)
    return app


def _stub_of(
    route: Route,
    stub: api_grpc.WorkflowServiceStub,
    admin: admin_grpc.AdminServiceStub,
    schedules: schedules_grpc.ScheduleServiceStub,
    approvals: approvals_grpc.ApprovalServiceStub,
) -> Any:
    """The service a route's method belongs to."""
    if route.admin:
        return admin
    if route.schedules:
        return schedules
    return approvals if route.approvals else stub


class HttpServer:
    """Serves the app on `listen`, calling the gateway's gRPC port at `grpc_target`."""

    def __init__(self, listen: str, grpc_target: str) -> None:
        self._listen = listen
        # Carries the service's credential: the guard then believes the client addresses it
        # relays.
        self._channel = service_channel(grpc_target)
        self._runner: web.AppRunner | None = None
        # HTTPS as the gRPC port: the gateway's certificate, client certificates when
        # PERDURE_GATEWAY_CLIENT_CERT=require.
        self._tls = https_context("gateway", gateway_requires_client_cert())
        self._reloading: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen; exit if the port is taken."""
        app = build_app(
            api_grpc.WorkflowServiceStub(self._channel),
            admin_grpc.AdminServiceStub(self._channel),
            schedules_grpc.ScheduleServiceStub(self._channel),
            approvals_grpc.ApprovalServiceStub(self._channel),
            https=self._tls is not None,
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, _, port = self._listen.rpartition(":")
        site = web.TCPSite(
            self._runner,
            host.strip("[]") or None,
            int(port),
            shutdown_timeout=SHUTDOWN_SECONDS,
            ssl_context=self._tls.context if self._tls else None,
        )
        try:
            await site.start()
        except OSError as error:
            raise SystemExit(f"gateway: cannot serve HTTP on {self._listen}: {error}") from None
        if self._tls is not None:
            self._reloading = asyncio.create_task(_reload_forever(self._tls))
        scheme = "https" if self._tls else "http"
        log.info("gateway HTTP API and web UI on %s://%s", scheme, self._listen)

    async def stop(self) -> None:
        """Stop serving (open feeds are cut after SHUTDOWN_SECONDS)."""
        if self._reloading is not None:
            self._reloading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloading
        if self._runner is not None:
            await self._runner.cleanup()
        await self._channel.close()


async def _reload_forever(tls: HttpsContext) -> None:
    while True:
        await asyncio.sleep(CERT_CHECK_SECONDS)
        tls.reload()


def _version() -> str:
    try:
        return metadata.version("perdure-gateway")
    except metadata.PackageNotFoundError:
        return "0"


def local_target(listen: str) -> str:
    """How this process reaches its own gRPC port (a wildcard host means this machine)."""
    host, _, port = listen.rpartition(":")
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = "localhost"
    return f"{host}:{port}"
