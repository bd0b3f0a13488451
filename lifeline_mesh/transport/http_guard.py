"""What a browser may ask of our HTTP servers (the viewer, `mcp --http`): one rule for both.

A web page the user visits can make the browser send requests to any address, loopback
included; the same-origin policy only stops it from *reading* the answers. Two attacks are
left, and this middleware refuses both before the application sees the request:

- **DNS rebinding.** The page's own name is made to resolve to 127.0.0.1; the browser then
  takes our server for the page's origin and lets the page read every answer. Such a
  request always carries the page's name in ``Host``. So a ``Host`` must be a name we
  serve: ``localhost``, an IP address (a rebinding page cannot have one for its name; a
  page *at* an IP address cannot rebind it), or a name given with ``--allow-host``.
  Over TLS the certificate does this job (the browser refuses our certificate for the
  page's name before it sends anything), so a TLS server answers any ``Host``.
- **Cross-site writes.** A form or ``fetch`` from another origin can still send a POST
  whose answer it never reads. Anything but GET/HEAD/OPTIONS that carries an ``Origin``
  must come from our own origin (the request's own ``Host``, scheme and port), or from a
  name given with ``--allow-host`` (a proxy in front, on whatever port). The listen host
  is a name we serve, not a trusted origin: a page on another port of 127.0.0.1 is
  another origin (another program), and is refused.

Refusals: 421 for a name we do not serve, 403 for a foreign origin, each with one line
saying what to do. Clients that are not browsers send no ``Origin`` and reach us by an
address or a name they were given, so they pass unchanged.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BrowserGuard", "host_allowed", "origin_allowed", "split_host"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def split_host(value: str) -> tuple[str, str]:
    """``host[:port]`` or ``[v6][:port]`` -> (lower-case host without brackets, port text)."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    return host, port


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(host_header: str, names: Iterable[str] = ()) -> bool:
    """Whether a request whose ``Host`` is ``host_header`` may be served (see the module)."""
    host, _ = split_host(host_header)
    if not host:
        return False
    return host == "localhost" or _is_address(host) or host in {n.lower() for n in names}


def origin_allowed(
    origin: str, host_header: str, names: Iterable[str] = (), *, scheme: str = "http"
) -> bool:
    """Whether a browser page at ``origin`` may send a write to the server reached as
    ``host_header`` over ``scheme``: the same origin, or a name given with ``--allow-host``."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null" (a sandboxed frame, a file:// page) is nobody we know
    default = "443" if parts.scheme == "https" else "80"
    own_host, own_port = split_host(host_header)
    page_host, page_port = split_host(parts.netloc)
    if page_host in {n.lower() for n in names}:
        return True
    own_default = "443" if scheme == "https" else "80"
    return (
        parts.scheme == scheme
        and page_host == own_host
        and (page_port or default) == (own_port or own_default)
    )


def _refusal(status: int, message: str) -> list[dict[str, object]]:
    body = (message + "\n").encode("utf-8")
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


class BrowserGuard:
    """ASGI middleware: refuse a ``Host`` we do not serve (421) and a write from a foreign
    ``Origin`` (403); everything else goes to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        names: Iterable[str] = (),
        *,
        what: str,
        tls: bool = False,
        listen: str | None = None,
    ) -> None:
        """``names``: those given with ``--allow-host`` (served, and trusted as origins on
        any port); ``listen``: the host the server listens on (served only)."""
        self.app = app
        self.tls = tls
        self.origins = frozenset(n.lower() for n in names)
        self.names = self.origins | ({listen.lower()} if listen else set())
        self.what = what  # "--allow-host" or "--ui-allow-host": the option that adds a name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan; neither server speaks websockets
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        refused: list[dict[str, object]] | None = None
        if host is not None and not self.tls and not host_allowed(host, self.names):
            shown = split_host(host)[0][:100]
            refused = _refusal(
                421,
                f"this server does not answer to the name {shown!r} (a page that renamed "
                f"this address is refused); reach it by localhost or its IP address, or "
                f"start it with {self.what} {shown or 'NAME'}",
            )
        elif scope.get("method", "GET") not in SAFE_METHODS:
            origin = headers.get("origin")
            scheme = str(scope.get("scheme", "http"))
            if origin is not None and not origin_allowed(
                origin, host or "", self.origins, scheme=scheme
            ):
                refused = _refusal(
                    403,
                    f"a page at {origin[:100]!r} may not send {scope.get('method')} here "
                    "(requests from other origins are refused); send it from this "
                    "server's own pages or without an Origin header",
                )
        if refused is None:
            await self.app(scope, receive, send)
            return
        for message in refused:
            await send(message)
