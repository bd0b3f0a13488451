"""Serving the viewer with uvicorn: where it may listen, and running until told to stop.

Loopback by default. Any other address needs ``remote=True`` (``--remote``) and a token,
because the pages show the whole ledger to whoever can reach the port. The socket is bound
here, before uvicorn starts, so the address (with the port chosen for ``:0``) is known and
printed at once; connections wait in the backlog until uvicorn accepts them.

Browsers: only requests that name the viewer by ``localhost``, an IP address, its listen
name or an ``--allow-host`` name are answered, and no other origin may send a write
(:mod:`lifeline_mesh.transport.http_guard`). Idle connections and their number are bounded
(:mod:`lifeline_mesh.transport.http_limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterable, Iterator

import uvicorn

from lifeline.errors import ConfigError
from lifeline_mesh.transport.addresses import is_loopback, listen_socket, split_address
from lifeline_mesh.transport.http_guard import BrowserGuard
from lifeline_mesh.transport.http_limits import server_config
from lifeline_mesh.ui.app import create_app
from lifeline_mesh.ui.defaults import TOKEN_ENV
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["bind", "check_listen", "serve_viewer"]


def check_listen(listen: str, *, remote: bool, token: str | None) -> tuple[str, int]:
    """``(host, port)`` of ``listen``, or a ConfigError that says what to change."""
    host, port = split_address(listen, what="--listen", listen=True)
    if not is_loopback(host):
        if not remote:
            raise ConfigError(
                f"--listen {listen} is not a loopback address; the viewer shows the whole "
                "ledger to anyone who reaches it. Add --remote and set a token "
                f"({TOKEN_ENV}) to serve it there"
            )
        if not token:
            raise ConfigError(
                f"--remote needs a token: set {TOKEN_ENV} (at least 16 characters) or pass --token"
            )
    if token is not None and len(token) < 16:
        raise ConfigError("the viewer's token is shorter than 16 characters; use a longer one")
    return host, port


def bind(host: str, port: int) -> socket.socket:
    return listen_socket(
        host, port, hint="pick another port with --listen 127.0.0.1:PORT (port 0 picks a free one)"
    )


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the caller owns shutdown (``stop``)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def url_of(sock: socket.socket, token: str | None) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


async def serve_viewer(
    viewer: Viewer,
    sock: socket.socket,
    stop: asyncio.Event,
    ready: Callable[[str], None],
    *,
    names: Iterable[str] = (),
    option: str = "--allow-host",
    listen: str | None = None,
) -> None:
    """Serve until ``stop`` is set; ``ready(url)`` once the socket accepts. Besides
    ``localhost``, IP addresses and the ``listen`` host, browsers may reach it by ``names``
    only (``option`` is the command-line option that adds one, named in the refusal)."""
    app = BrowserGuard(create_app(viewer), names, what=option, listen=listen)
    config = server_config(app, log_level=logging.WARNING, access_log=False, lifespan="on")
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    ready(url_of(sock, viewer.token))
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    waiter.cancel()
    await task
