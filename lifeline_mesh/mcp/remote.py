"""The MCP server over streamable HTTP, for agents on machines without a node.

The same server as on stdio (:func:`~lifeline_mesh.mcp.server.build_server`: the same
tools, write policy, proposals and signatures), on the official SDK's streamable-HTTP
transport, served by uvicorn. Every request must carry a bearer token issued by this node
(:mod:`lifeline_mesh.mcp.tokens`); :class:`TokenAuth` checks it before the SDK sees the
request and answers 401 with the reason, or hands the SDK the caller (its role and agent,
see :mod:`lifeline_mesh.mcp.caller`) the way the SDK's own bearer middleware would, so a
session stays bound to the token that opened it. TLS is on by default, with the node's mesh
certificate (or ``--tls-cert``/``--tls-key``); plain HTTP (``--insecure``) is refused
anywhere but loopback. Tokens are required on every address. Browsers: no other origin may
send a request, and over plain HTTP only ``localhost``, IP addresses and ``--allow-host``
names are answered (:mod:`lifeline_mesh.transport.http_guard`); idle connections and their
number are bounded (:mod:`lifeline_mesh.transport.http_limits`).
"""

from __future__ import annotations

import json
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.boundary import hide_path
from lifeline_mesh.mcp.server import build_server
from lifeline_mesh.mcp.tokens import TokenBook, TokenRefused
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.membership import files
from lifeline_mesh.transport.addresses import is_loopback, listen_socket
from lifeline_mesh.transport.http_guard import BrowserGuard
from lifeline_mesh.transport.http_limits import server_config

__all__ = ["HttpOptions", "TokenAuth", "serve_http"]

MCP_PATH = "/mcp"


@dataclass(frozen=True, slots=True)
class HttpOptions:
    host: str
    port: int
    insecure: bool = False  # plain HTTP: loopback only
    cert: Path | None = None  # default: the node's mesh certificate
    key: Path | None = None
    # No session held between requests: any process of a hub can answer any request.
    stateless: bool = False
    allow_hosts: tuple[str, ...] = ()  # names browsers may use besides localhost and IPs

    def check(self, home: NodeHome) -> tuple[Path, Path] | None:
        """The certificate and key to serve, or None for plain HTTP; refuses what is unsafe."""
        where = f"{self.host}:{self.port}"
        if self.insecure:
            if not is_loopback(self.host):
                raise ConfigError(
                    f"--insecure refused for {where}: plain HTTP is only allowed on loopback "
                    "(127.0.0.1, ::1); drop --insecure to serve TLS (bearer tokens would "
                    "cross the network in the clear)"
                )
            if self.cert or self.key:
                raise ConfigError("--insecure and --tls-cert/--tls-key exclude each other")
            return None
        if (self.cert is None) != (self.key is None):
            raise ConfigError("give --tls-cert and --tls-key together (a certificate and its key)")
        cert = self.cert or home.tls_cert_path
        key = self.key or home.tls_key_path
        for path in (cert, key):
            if not path.exists():
                raise ConfigError(
                    f"{path} is missing: TLS needs a certificate; join a mesh (`lifeline-mesh "
                    "join -`), or give --tls-cert/--tls-key, or on loopback only --insecure"
                )
        files.read_private(key)  # refuses a key other users can read, naming chmod 600
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"cannot serve TLS with {cert} and {key} ({exc}); give a PEM certificate "
                "and its own private key"
            ) from exc
        return cert, key


def _refusal(status: int, error: str, message: str) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"error": error, "error_description": message}).encode("utf-8")
    quoted = message.replace("\\", "\\\\").replace('"', "'")
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (
                b"www-authenticate",
                f'Bearer error="{error}", error_description="{quoted}"'.encode("ascii", "replace"),
            ),
        ],
    }
    return start, body


class TokenAuth:
    """ASGI middleware: a valid bearer token of this node, or 401 saying why."""

    def __init__(self, app: ASGIApp, book: TokenBook) -> None:
        self.app = app
        self.book = book

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan: starts the SDK's session manager
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization", "")
        if not header.lower().startswith("bearer "):
            await self._refuse(
                send,
                401,
                "no bearer token: send 'Authorization: Bearer lmt1_...' (a token from "
                "`lifeline-mesh mcp token issue NAME` on the serving node)",
            )
            return
        try:
            grant = await anyio.to_thread.run_sync(self.book.check, header[7:])
        except TokenRefused as exc:
            await self._refuse(send, 401, str(exc))
            return
        except ConfigError as exc:  # the token book itself is damaged or unreadable
            await self._refuse(send, 503, str(exc), error="temporarily_unavailable")
            return
        claims = {"name": grant.name, "role": grant.role, "agent": grant.agent}
        user = AuthenticatedUser(
            AccessToken(
                token=grant.token_id,  # never the secret
                client_id=grant.token_id,
                subject=grant.name,
                scopes=[grant.role],
                claims={**claims, "author": grant.author},
            )
        )
        scope = {**scope, "user": user, "auth": AuthCredentials([grant.role])}
        reset = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

    @staticmethod
    async def _refuse(send: Send, status: int, message: str, error: str = "invalid_token") -> None:
        start, body = _refusal(status, error, message)
        await send(start)
        await send({"type": "http.response.body", "body": body})


async def serve_http(ws: Workspace, opts: HttpOptions, book: TokenBook) -> None:
    """Serve until SIGINT/SIGTERM; prints the URL once it listens."""
    import uvicorn  # only this command needs it

    hide_path(ws.home.root)  # a client elsewhere has no use for where the project lives
    tls = opts.check(ws.home)
    server = build_server(ws)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=opts.host,
        stateless_http=opts.stateless,
        # BrowserGuard below holds the Host/Origin rule, the same as the viewer's; the
        # SDK's own list would need every name and port spelled out in advance.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sock = listen_socket(opts.host, opts.port, hint="pick another --http address")
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls else "http"
    guarded = BrowserGuard(
        TokenAuth(app, book), opts.allow_hosts, what="--allow-host", tls=tls is not None,
        listen=opts.host,
    )  # fmt: skip
    config = server_config(
        guarded,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    how = "TLS" if tls else "plain HTTP (loopback only)"
    print(f"serving MCP on {scheme}://{shown}:{port}{MCP_PATH} ({how}; bearer tokens)", flush=True)
    if not book.rows():
        print(
            "no MCP token issued yet: `lifeline-mesh mcp token issue NAME --role reader`",
            file=sys.stderr,
        )
    await uvicorn.Server(config).serve(sockets=[sock])
