"""The security headers of every answer of the HTTP port, the web UI's and the API's alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

# The UI is ES modules and one stylesheet from /ui/, no inline script or style; it talks only
# to this origin, and no page may frame it. Forms are handled by script: none may navigate
# (an API key field submitted as a query string would reach logs).
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Only over HTTPS: sent over plain HTTP, browsers ignore it anyway.
STRICT_TRANSPORT_SECURITY = "max-age=31536000"

OnPrepare = Callable[[web.Request, web.StreamResponse], Awaitable[None]]


def security_headers(https: bool) -> OnPrepare:
    """An `on_response_prepare` hook adding the headers (HSTS too when `https`)."""
    headers = dict(SECURITY_HEADERS)
    if https:
        headers["Strict-Transport-Security"] = STRICT_TRANSPORT_SECURITY

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(headers)

    return add
