"""The viewer as an ASGI application: the sections' routes, the packaged assets, error pages,
and the headers and token check every response goes through.

Read-only: every route answers GET (and HEAD); nothing on the site writes to a line.
The content security policy allows scripts, styles and images from the site itself only,
so even an escaping bug could not run a script that came from an entry.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lifeline.errors import AmbiguousPrefix, ConfigError, LifelineError, NotFound
from lifeline_mesh.transport.loopback_peer import loopback_peer_uid
from lifeline_mesh.ui.defaults import TOKEN_ENV
from lifeline_mesh.ui.hub_copy import LinePreparing
from lifeline_mesh.ui.render import page
from lifeline_mesh.ui.sections import SECTIONS
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["ASSETS", "CSP", "SESSION_COOKIE", "create_app"]

ASSETS = Path(__file__).resolve().parent / "static"
# What the address's ?token= opens: a key of this process, never the token itself. A
# browser sends a host's cookies to every port of it (RFC 6265), so any program listening
# on another port of 127.0.0.1 that the browser visits receives it: that program learns a
# key that dies with this viewer, not the token (kept in an environment for scripts).
SESSION_COOKIE = "lifeline_ui_session"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
RELOAD_S = 2  # a page that waits for a hub line's first copy reloads itself this often
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class _Guard:
    """Security headers on every response, and the time the server took to start it
    (``Server-Timing: app;dur=MS``); with a token, nothing without it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token
        self.session = secrets.token_urlsafe(32)  # the cookie's value, this process only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        start = time.perf_counter()

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Pages are rendered whole before they start: this is the server's time.
                took = f"app;dur={(time.perf_counter() - start) * 1000:.1f}".encode()
                headers = list(message.get("headers", []))
                message["headers"] = [*headers, *_HEADERS, (b"server-timing", took)]
            await send(message)

        refused = self._check(Request(scope)) if self.token is not None else _other_user(scope)
        if refused is not None:
            await refused(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def _check(self, request: Request) -> Response | None:
        assert self.token is not None
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
            target = request.url.path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(SESSION_COOKIE, self.session, httponly=True, samesite="strict")
            return response
        header = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        cookie = request.cookies.get(SESSION_COOKIE, "")
        for given, expected in ((header, self.token), (cookie, self.session)):
            if given and hmac.compare_digest(given.encode(), expected.encode()):
                return None
        return PlainTextResponse(
            "this viewer needs its token: open the address `lifeline-mesh ui` printed "
            "(it ends in ?token=...), or send `Authorization: Bearer TOKEN`\n",
            status_code=401,
        )


def _other_user(scope: Scope) -> Response | None:
    """A refusal for a request from another user of this machine, when the viewer has no
    token: a loopback port is open to every local user, and the pages show every line and
    session (transport/loopback_peer.py; root, who reads the files anyway, is let in).
    Asked for every request, never remembered by client address: a port the owner's
    browser let go can be bound by another user for their next connection."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server or not hasattr(os, "geteuid"):
        return None
    uid = loopback_peer_uid((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
    if uid is None or uid in (os.geteuid(), 0):
        return None
    return PlainTextResponse(
        f"this viewer shows its lines only to the user who started it, and this request "
        f"comes from another user of the machine (uid {uid}); to share it, start it with "
        f"a token ({TOKEN_ENV}) and give them the address it prints\n",
        status_code=403,
    )


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, LinePreparing):  # a hub line's first copy: come back in a moment
        response = page(
            request,
            "error.html",
            section="",
            title="Preparing",
            status=503,
            heading=f"Preparing line {exc.line}",
            message=str(exc),
            reload_after=RELOAD_S,
        )
        response.headers["retry-after"] = str(RELOAD_S)
        return response
    if isinstance(exc, NotFound):
        status, heading = 404, "Not found"
    elif isinstance(exc, ConfigError | AmbiguousPrefix):
        status, heading = 400, "Cannot show this"
    else:
        status, heading = 500, "The viewer could not read this"
    return page(
        request,
        "error.html",
        section="",
        title=heading,
        status=status,
        heading=heading,
        message=str(exc),
        reload_after=None,
    )


def create_app(viewer: Viewer) -> ASGIApp:
    """The site over ``viewer``'s project (served or, with ``viewer.static``, for a copy)."""

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        viewer.start_warm_up()
        try:
            yield
        finally:
            await viewer.close()

    routes: list[BaseRoute] = [r for s in SECTIONS for r in s.routes]
    routes.append(Mount("/assets", StaticFiles(directory=ASSETS), name="assets"))
    app = Starlette(
        routes=routes,
        exception_handlers={LifelineError: _error},
        lifespan=lifespan,
    )
    app.state.viewer = viewer
    app.state.sections = SECTIONS  # each page's navigation (render.page)
    return _Guard(app, viewer.token)
